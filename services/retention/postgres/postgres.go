// Package postgres is the retention Source for the events DB: the monthly
// partitions of events.events and facts.facts and the events.archives table.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/pglock"
	"threatview/retention"
)

// Tables are the monthly-partitioned tables of the events DB. The rollups
// (facts.events_by_*) are small and kept.
var Tables = []string{"events.events", "facts.facts"}

// lockKey is the advisory lock both retention jobs take on the events DB.
const lockKey = "threatview.retention"

// dropLockTimeout bounds how long a DROP waits for the parent's lock, so
// cleanup never stalls the processor's inserts for long.
const dropLockTimeout = "10s"

// Source reads and changes the events DB.
type Source struct {
	pool   *pgxpool.Pool
	tables []string
}

// Open connects to the events DB at url; sessions run in UTC so rows
// render the same every time.
func Open(ctx context.Context, url string) (*Source, error) {
	s, err := openPool(url, 4)
	if err != nil {
		return nil, err
	}
	if err := s.pool.Ping(ctx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("connect events DB: %w", err)
	}
	return s, nil
}

// OpenLazy is Open without the first connection: a long-running service
// starts while the database is away and connects on first use.
func OpenLazy(url string) (*Source, error) { return openPool(url, 2) }

func openPool(url string, conns int32) (*Source, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse EVENTS_DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.MaxConns = conns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("connect events DB: %w", err)
	}
	return &Source{pool: pool, tables: Tables}, nil
}

// Name returns "events".
func (s *Source) Name() string { return "events" }

// Close closes the pool.
func (s *Source) Close() { s.pool.Close() }

var boundRE = regexp.MustCompile(`^FOR VALUES FROM \('([^']+)'\) TO \('([^']+)'\)$`)

func parseBound(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05-07", "2006-01-02 15:04:05-07:00", "2006-01-02 15:04:05.999999-07"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("bad partition bound %q", s)
}

// Partitions lists the monthly partitions (one calendar month each) of the
// managed tables, oldest first. Default partitions and partitions of other
// shapes are never returned, so never archived or dropped.
func (s *Source) Partitions(ctx context.Context) ([]retention.Partition, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT pn.nspname || '.' || p.relname, c.relname, pg_get_expr(c.relpartbound, c.oid), pg_total_relation_size(c.oid)
		  FROM pg_inherits i
		  JOIN pg_class c ON c.oid = i.inhrelid
		  JOIN pg_class p ON p.oid = i.inhparent
		  JOIN pg_namespace pn ON pn.oid = p.relnamespace
		 WHERE pn.nspname || '.' || p.relname = ANY($1)`, s.tables)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	defer rows.Close()
	var out []retention.Partition
	for rows.Next() {
		var p retention.Partition
		var bound string
		if err := rows.Scan(&p.Table, &p.Name, &bound, &p.Bytes); err != nil {
			return nil, fmt.Errorf("list partitions: %w", err)
		}
		m := boundRE.FindStringSubmatch(bound)
		if m == nil {
			continue
		}
		if p.From, err = parseBound(m[1]); err != nil {
			continue
		}
		if p.To, err = parseBound(m[2]); err != nil {
			continue
		}
		p.Month = retention.MonthStart(p.From)
		if !p.From.Equal(p.Month) || !p.To.Equal(p.Month.AddDate(0, 1, 0)) {
			continue // not one calendar month
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	sortPartitions(out)
	return out, nil
}

func sortPartitions(ps []retention.Partition) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && less(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func less(a, b retention.Partition) bool {
	if !a.Month.Equal(b.Month) {
		return a.Month.Before(b.Month)
	}
	return a.Table < b.Table
}

func ident(qualified string) string {
	schema, name, ok := strings.Cut(qualified, ".")
	if !ok {
		return pgx.Identifier{qualified}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

func (s *Source) partIdent(p retention.Partition) string {
	schema, _, _ := strings.Cut(p.Table, ".")
	return pgx.Identifier{schema, p.Name}.Sanitize()
}

func (s *Source) primaryKey(ctx context.Context, table string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT a.attname
		  FROM pg_index i
		  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		 WHERE i.indrelid = $1::regclass AND i.indisprimary
		 ORDER BY array_position(i.indkey::int2[], a.attnum)`, table)
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", table, err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", table, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %s has no primary key", table)
	}
	return cols, nil
}

// Columns lists table's columns in order.
func (s *Source) Columns(ctx context.Context, table string) ([]retention.Column, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT attname, format_type(atttypid, atttypmod)
		  FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped
		 ORDER BY attnum`, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (retention.Column, error) {
		var c retention.Column
		err := r.Scan(&c.Name, &c.Type)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	return cols, nil
}

// Export streams p's rows as row_to_json text in primary-key order: one
// ordered query read as the server sends it, inside a read-only
// repeatable-read transaction so the rows are one snapshot.
func (s *Source) Export(ctx context.Context, p retention.Partition, emit func([]byte) error) error {
	pk, err := s.primaryKey(ctx, p.Table)
	if err != nil {
		return err
	}
	order := make([]string, len(pk))
	for i, c := range pk {
		order[i] = "t." + pgx.Identifier{c}.Sanitize()
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export %s: %w", p.Name, err)
	}
	defer tx.Rollback(context.Background())
	// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
	rows, err := tx.Query(ctx, fmt.Sprintf("SELECT row_to_json(t)::text FROM ONLY %s t ORDER BY %s",
		s.partIdent(p), strings.Join(order, ", ")), pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return fmt.Errorf("export %s: %w", p.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := emit(rows.RawValues()[0]); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export %s: %w", p.Name, err)
	}
	return nil
}

// Count counts p's rows.
func (s *Source) Count(ctx context.Context, p retention.Partition) (int64, error) {
	var n int64
	// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM ONLY "+s.partIdent(p)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", p.Name, err)
	}
	return n, nil
}

// SchemaVersion returns the highest applied migration.
func (s *Source) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.pool.QueryRow(ctx, "SELECT COALESCE(max(version_id), 0) FROM goose_db_version WHERE is_applied").Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// Record returns the archive record of table for month.
func (s *Source) Record(ctx context.Context, table string, month time.Time) (retention.Record, error) {
	var r retention.Record
	var files []byte
	err := s.pool.QueryRow(ctx, `
		SELECT table_name, partition_name, month, range_to, row_count, byte_count, files,
		       content_sha256, manifest_sha256, location, schema_version, verified_at
		  FROM events.archives WHERE table_name = $1 AND month = $2`, table, month).
		Scan(&r.Table, &r.Partition, &r.From, &r.To, &r.Rows, &r.Bytes, &files,
			&r.ContentSHA256, &r.ManifestSHA256, &r.Location, &r.SchemaVersion, &r.VerifiedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("archive of %s %s: %w", table, retention.MonthString(month), retention.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("archive of %s %s: %w", table, retention.MonthString(month), err)
	}
	if err := json.Unmarshal(files, &r.Files); err != nil {
		return r, fmt.Errorf("archive of %s %s: files: %w", table, retention.MonthString(month), err)
	}
	return r, nil
}

// SaveRecord inserts or replaces r.
func (s *Source) SaveRecord(ctx context.Context, r retention.Record) error {
	files, err := json.Marshal(r.Files)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `
		INSERT INTO events.archives (table_name, month, range_to, partition_name, row_count, byte_count, files,
		       content_sha256, manifest_sha256, location, schema_version, verified_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (table_name, month) DO UPDATE SET range_to = EXCLUDED.range_to,
		       partition_name = EXCLUDED.partition_name, row_count = EXCLUDED.row_count,
		       byte_count = EXCLUDED.byte_count, files = EXCLUDED.files,
		       content_sha256 = EXCLUDED.content_sha256, manifest_sha256 = EXCLUDED.manifest_sha256,
		       location = EXCLUDED.location, schema_version = EXCLUDED.schema_version,
		       verified_at = EXCLUDED.verified_at`,
		r.Table, r.From, r.To, r.Partition, r.Rows, r.Bytes, files, r.ContentSHA256, r.ManifestSHA256,
		r.Location, r.SchemaVersion, r.VerifiedAt)
	if err != nil {
		return fmt.Errorf("record archive of %s: %w", r.Partition, err)
	}
	return nil
}

// ArchivedMonths lists the months of table with an archive record, oldest
// first.
func (s *Source) ArchivedMonths(ctx context.Context, table string) ([]time.Time, error) {
	rows, err := s.pool.Query(ctx, "SELECT month FROM events.archives WHERE table_name = $1 ORDER BY month", table)
	if err != nil {
		return nil, fmt.Errorf("archived months of %s: %w", table, err)
	}
	months, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("archived months of %s: %w", table, err)
	}
	for i := range months {
		months[i] = months[i].UTC()
	}
	return months, nil
}

// DeleteRecord removes the archive record of table for month.
func (s *Source) DeleteRecord(ctx context.Context, table string, month time.Time) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM events.archives WHERE table_name = $1 AND month = $2", table, month); err != nil {
		return fmt.Errorf("delete archive record of %s %s: %w", table, retention.MonthString(month), err)
	}
	return nil
}

// Drop detaches p from its table and drops it in one transaction, waiting
// at most dropLockTimeout for the table's lock.
func (s *Source) Drop(ctx context.Context, p retention.Partition) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+dropLockTimeout+"'"); err != nil {
			return err
		}
		// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s", ident(p.Table), s.partIdent(p))); err != nil {
			return err
		}
		// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
		_, err := tx.Exec(ctx, "DROP TABLE "+s.partIdent(p))
		return err
	})
	if err != nil {
		return fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	return nil
}

// DropCounted locks p against writes (SHARE: readers go on, writers wait),
// counts it, and detaches and drops it in the same transaction only if it
// holds exactly rows rows. Writers to other months are not blocked by the
// count; the detach takes the parent's lock only for its own moment. Should
// a writer routed to p meet the detach, Postgres breaks the deadlock by
// failing one side, which retries (the processor) or runs again (cleanup).
func (s *Source) DropCounted(ctx context.Context, p retention.Partition, rows int64) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+dropLockTimeout+"'"); err != nil {
			return err
		}
		// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
		if _, err := tx.Exec(ctx, "LOCK TABLE ONLY "+s.partIdent(p)+" IN SHARE MODE"); err != nil {
			return err
		}
		var n int64
		// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM ONLY "+s.partIdent(p)).Scan(&n); err != nil {
			return err
		}
		if n != rows {
			return fmt.Errorf("%w: %s holds %d rows, its archive %d", retention.ErrChanged, p.Name, n, rows)
		}
		// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s", ident(p.Table), s.partIdent(p))); err != nil {
			return err
		}
		// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
		_, err := tx.Exec(ctx, "DROP TABLE "+s.partIdent(p))
		return err
	})
	if errors.Is(err, retention.ErrChanged) {
		return err
	}
	if err != nil {
		return fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	return nil
}

// EnsurePartition creates table's partition for month (for a restore) with
// the schema's own events.restore_monthly_partition, then returns it.
func (s *Source) EnsurePartition(ctx context.Context, table string, month time.Time) (retention.Partition, error) {
	// Not ensure_monthly_partitions: that one never re-creates a month that
	// was archived and dropped, which is exactly what a restore does.
	if _, err := s.pool.Exec(ctx, "SELECT events.restore_monthly_partition($1::regclass, $2)", table, month); err != nil {
		return retention.Partition{}, fmt.Errorf("create partition of %s for %s: %w", table, retention.MonthString(month), err)
	}
	parts, err := s.Partitions(ctx)
	if err != nil {
		return retention.Partition{}, err
	}
	for _, p := range parts {
		if p.Table == table && p.Month.Equal(month) {
			return p, nil
		}
	}
	return retention.Partition{}, fmt.Errorf("partition of %s for %s: %w", table, retention.MonthString(month), retention.ErrNotFound)
}

// Insert restores rows through the parent table (so they land in their
// partition), skipping rows whose primary key exists.
func (s *Source) Insert(ctx context.Context, table string, cols []retention.Column, lines [][]byte) (int64, error) {
	size := 2
	for _, l := range lines {
		size += len(l) + 1
	}
	arr := make([]byte, 0, size)
	arr = append(arr, '[')
	for i, l := range lines {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, l...)
	}
	arr = append(arr, ']')
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = pgx.Identifier{c.Name}.Sanitize()
	}
	list := strings.Join(names, ", ")
	// sql: identifiers only, quoted with pgx.Identifier.Sanitize (ident, partIdent); values are arguments.
	tag, err := s.pool.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM json_populate_recordset(NULL::%s, $1::json) ON CONFLICT DO NOTHING",
		ident(table), list, list, ident(table)), string(arr))
	if err != nil {
		return 0, fmt.Errorf("restore into %s: %w", table, err)
	}
	return tag.RowsAffected(), nil
}

// Lock takes the events DB's retention advisory lock on a connection of
// its own (platform/pglock), held until unlock, or returns
// retention.ErrBusy. Not a pooled connection: the pool (two connections in
// a long-running service) keeps both for the job, and no connection goes
// back to it still holding the lock should the unlock fail.
func (s *Source) Lock(ctx context.Context) (func(), error) {
	lease, err := pglock.New(pglock.Config{Name: "retention lock", ConnConfig: s.pool.Config().ConnConfig,
		TextKey: lockKey}, nil).TryAcquire(ctx)
	if errors.Is(err, pglock.ErrHeld) {
		return nil, retention.ErrBusy
	}
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return lease.Release, nil
}
