// Package mariadb is the retention Source for the audit DB: the monthly
// partitions pYYYYMM of audit_events (beside the catch-all pmax) and the
// archives table.
package mariadb

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"threatview/migrations"
	"threatview/retention"
)

// Table is the partitioned table of the audit DB.
const Table = "audit_events"

// lockName is the named lock both retention jobs take on the audit DB.
const lockName = "threatview.retention"

// Source reads and changes the audit DB.
type Source struct {
	db *sql.DB
}

// Open connects to the audit DB at dsn and checks it answers. Values are
// read as the server's text (parseTime off, UTC session), so rows render
// the same every time.
func Open(ctx context.Context, dsn string) (*Source, error) {
	s, err := OpenLazy(dsn)
	if err != nil {
		return nil, err
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("connect audit DB: %w", err)
	}
	return s, nil
}

// OpenLazy is Open without connecting: a long-running service opens its
// source at start, whether the database is up then or not.
func OpenLazy(dsn string) (*Source, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse AUDIT_DATABASE_DSN: %w", err)
	}
	cfg.ParseTime = false
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("connect audit DB: %w", err)
	}
	db.SetMaxOpenConns(4)
	return &Source{db: db}, nil
}

// Name returns "audit".
func (s *Source) Name() string { return "audit" }

// Close closes the pool.
func (s *Source) Close() { s.db.Close() }

func parseBound(desc string) (time.Time, error) {
	v := strings.Trim(desc, "'")
	for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad partition bound %q", desc)
}

// Partitions lists the monthly partitions of audit_events, oldest first: a
// partition named pYYYYMM whose upper bound is the next month. Its lower
// bound is the previous partition's upper bound (none for the first). The
// catch-all pmax is never returned.
func (s *Source) Partitions(ctx context.Context) ([]retention.Partition, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT PARTITION_NAME, PARTITION_DESCRIPTION, COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)
		  FROM information_schema.PARTITIONS
		 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL
		 ORDER BY PARTITION_ORDINAL_POSITION`, Table)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	defer rows.Close()
	var out []retention.Partition
	var prev time.Time
	for rows.Next() {
		var name, desc string
		var size int64
		if err := rows.Scan(&name, &desc, &size); err != nil {
			return nil, fmt.Errorf("list partitions: %w", err)
		}
		to, err := parseBound(desc)
		if err != nil {
			continue // MAXVALUE
		}
		from := prev
		prev = to
		month := to.AddDate(0, -1, 0)
		if !to.Equal(retention.MonthStart(to)) || name != migrations.AuditPartitionName(month) {
			continue
		}
		out = append(out, retention.Partition{Table: Table, Name: name, Month: month, From: from, To: to, Bytes: size})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	return out, nil
}

var binaryTypes = map[string]bool{"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true}

// Columns lists table's columns in order; binary ones are base64 in archives.
func (s *Source) Columns(ctx context.Context, table string) ([]retention.Column, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE FROM information_schema.COLUMNS
		 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []retention.Column
	for rows.Next() {
		var c retention.Column
		var dt string
		if err := rows.Scan(&c.Name, &c.Type, &dt); err != nil {
			return nil, fmt.Errorf("columns of %s: %w", table, err)
		}
		c.Binary = binaryTypes[strings.ToLower(dt)]
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %s: %w", table, retention.ErrNotFound)
	}
	return cols, nil
}

func (s *Source) primaryKey(ctx context.Context, table string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT COLUMN_NAME FROM information_schema.STATISTICS
		 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX`, table)
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", table, err)
	}
	defer rows.Close()
	var pk []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		pk = append(pk, c)
	}
	if len(pk) == 0 {
		return nil, fmt.Errorf("table %s has no primary key", table)
	}
	return pk, rows.Err()
}

func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// Export streams p's rows in primary-key order as JSON objects of the
// columns' text (base64 for binary columns, null for NULL), inside a
// consistent-snapshot transaction.
func (s *Source) Export(ctx context.Context, p retention.Partition, emit func([]byte) error) error {
	cols, err := s.Columns(ctx, p.Table)
	if err != nil {
		return err
	}
	pk, err := s.primaryKey(ctx, p.Table)
	if err != nil {
		return err
	}
	names := make([]string, len(cols))
	keys := make([][]byte, len(cols))
	for i, c := range cols {
		names[i] = quote(c.Name)
		k, _ := json.Marshal(c.Name)
		keys[i] = append(k, ':')
	}
	order := make([]string, len(pk))
	for i, c := range pk {
		order[i] = quote(c)
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("export %s: %w", p.Name, err)
	}
	defer tx.Rollback()
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	rows, err := tx.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s PARTITION (%s) ORDER BY %s",
		strings.Join(names, ", "), quote(p.Table), quote(p.Name), strings.Join(order, ", ")))
	if err != nil {
		return fmt.Errorf("export %s: %w", p.Name, err)
	}
	defer rows.Close()
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var line []byte
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("export %s: %w", p.Name, err)
		}
		line = line[:0]
		line = append(line, '{')
		for i, v := range vals {
			if i > 0 {
				line = append(line, ',')
			}
			line = append(line, keys[i]...)
			switch {
			case v == nil:
				line = append(line, "null"...)
			case cols[i].Binary:
				line = append(line, '"')
				line = base64.StdEncoding.AppendEncode(line, v)
				line = append(line, '"')
			default:
				if !utf8.Valid(v) {
					return fmt.Errorf("export %s: column %s holds invalid UTF-8", p.Name, cols[i].Name)
				}
				line = appendJSONString(line, v)
			}
		}
		line = append(line, '}')
		if err := emit(line); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export %s: %w", p.Name, err)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// Count counts p's rows.
func (s *Source) Count(ctx context.Context, p retention.Partition) (int64, error) {
	var n int64
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s PARTITION (%s)", quote(p.Table), quote(p.Name))
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	if err := s.db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", p.Name, err)
	}
	return n, nil
}

// SchemaVersion returns the highest applied migration.
func (s *Source) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied").Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

const dbTime = "2006-01-02 15:04:05.999999"

// Record returns the archive record of table for month.
func (s *Source) Record(ctx context.Context, table string, month time.Time) (retention.Record, error) {
	var r retention.Record
	var from, to, verified, files string
	err := s.db.QueryRowContext(ctx, `
		SELECT table_name, partition_name, month, range_to, row_count, byte_count, files,
		       content_sha256, manifest_sha256, location, schema_version, verified_at
		  FROM archives WHERE table_name = ? AND month = ?`, table, month.UTC().Format(dbTime)).
		Scan(&r.Table, &r.Partition, &from, &to, &r.Rows, &r.Bytes, &files,
			&r.ContentSHA256, &r.ManifestSHA256, &r.Location, &r.SchemaVersion, &verified)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("archive of %s %s: %w", table, retention.MonthString(month), retention.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("archive of %s %s: %w", table, retention.MonthString(month), err)
	}
	for _, f := range []struct {
		s string
		t *time.Time
	}{{from, &r.From}, {to, &r.To}, {verified, &r.VerifiedAt}} {
		if *f.t, err = parseBound(f.s); err != nil {
			return r, fmt.Errorf("archive of %s %s: %w", table, retention.MonthString(month), err)
		}
	}
	if err := json.Unmarshal([]byte(files), &r.Files); err != nil {
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
	_, err = s.db.ExecContext(ctx, `
		REPLACE INTO archives (table_name, month, range_to, partition_name, row_count, byte_count, files,
		       content_sha256, manifest_sha256, location, schema_version, verified_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Table, r.From.UTC().Format(dbTime), r.To.UTC().Format(dbTime), r.Partition, r.Rows, r.Bytes, string(files),
		r.ContentSHA256, r.ManifestSHA256, r.Location, r.SchemaVersion, r.VerifiedAt.UTC().Format(dbTime))
	if err != nil {
		return fmt.Errorf("record archive of %s: %w", r.Partition, err)
	}
	return nil
}

// ArchivedMonths lists the months of table with an archive record, oldest
// first.
func (s *Source) ArchivedMonths(ctx context.Context, table string) ([]time.Time, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT month FROM archives WHERE table_name = ? ORDER BY month", table)
	if err != nil {
		return nil, fmt.Errorf("archived months of %s: %w", table, err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("archived months of %s: %w", table, err)
		}
		m, err := parseBound(v)
		if err != nil {
			return nil, fmt.Errorf("archived months of %s: %w", table, err)
		}
		out = append(out, m.UTC())
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("archived months of %s: %w", table, err)
	}
	return out, nil
}

// DeleteRecord removes the archive record of table for month.
func (s *Source) DeleteRecord(ctx context.Context, table string, month time.Time) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM archives WHERE table_name = ? AND month = ?", table, month.UTC().Format(dbTime)); err != nil {
		return fmt.Errorf("delete archive record of %s %s: %w", table, retention.MonthString(month), err)
	}
	return nil
}

// Drop drops partition p (never pmax: Partitions does not return it).
func (s *Source) Drop(ctx context.Context, p retention.Partition) error {
	if p.Name == "pmax" {
		return fmt.Errorf("refusing to drop the catch-all partition pmax")
	}
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION %s", quote(p.Table), quote(p.Name))); err != nil {
		return fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	return nil
}

// DropCounted takes a write lock on audit_events (LOCK TABLES), counts p,
// and drops it under the same lock only if it holds exactly rows rows. Audit
// writes wait meanwhile (the count reads one partition's index).
func (s *Source) DropCounted(ctx context.Context, p retention.Partition, rows int64) error {
	if p.Name == "pmax" {
		return fmt.Errorf("refusing to drop the catch-all partition pmax")
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	defer conn.Close()
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+quote(p.Table)+" WRITE"); err != nil {
		return fmt.Errorf("drop partition %s: lock: %w", p.Name, err)
	}
	defer conn.ExecContext(context.Background(), "UNLOCK TABLES") //nolint:errcheck // the connection is closed next anyway
	var n int64
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s PARTITION (%s)", quote(p.Table), quote(p.Name))).Scan(&n); err != nil {
		return fmt.Errorf("drop partition %s: count: %w", p.Name, err)
	}
	if n != rows {
		return fmt.Errorf("%w: %s holds %d rows, its archive %d", retention.ErrChanged, p.Name, n, rows)
	}
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION %s", quote(p.Table), quote(p.Name))); err != nil {
		return fmt.Errorf("drop partition %s: %w", p.Name, err)
	}
	return nil
}

// EnsurePartition makes sure audit_events has partition pYYYYMM for month.
// When it is missing, the partition now holding that month's range (the
// lowest one above it, possibly pmax) is split in two.
func (s *Source) EnsurePartition(ctx context.Context, table string, month time.Time) (retention.Partition, error) {
	if table != Table {
		return retention.Partition{}, fmt.Errorf("table %s is not in the audit DB", table)
	}
	name := migrations.AuditPartitionName(month)
	to := month.AddDate(0, 1, 0)
	find := func() (retention.Partition, bool, error) {
		parts, err := s.Partitions(ctx)
		if err != nil {
			return retention.Partition{}, false, err
		}
		for _, p := range parts {
			if p.Name == name {
				return p, true, nil
			}
		}
		return retention.Partition{}, false, nil
	}
	if p, ok, err := find(); err != nil || ok {
		return p, err
	}
	// The lowest partition whose upper bound lies above the month holds it.
	rows, err := s.db.QueryContext(ctx, `
		SELECT PARTITION_NAME, PARTITION_DESCRIPTION FROM information_schema.PARTITIONS
		 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL
		 ORDER BY PARTITION_ORDINAL_POSITION`, Table)
	if err != nil {
		return retention.Partition{}, fmt.Errorf("list partitions: %w", err)
	}
	var holder, holderDesc string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			rows.Close()
			return retention.Partition{}, err
		}
		b, err := parseBound(d)
		if err != nil || b.After(month) {
			holder, holderDesc = n, d
			break
		}
	}
	rows.Close()
	if holder == "" {
		return retention.Partition{}, fmt.Errorf("no partition of %s can hold %s", Table, retention.MonthString(month))
	}
	if b, err := parseBound(holderDesc); err == nil && b.Before(to) {
		return retention.Partition{}, fmt.Errorf("partition %s of %s overlaps month %s; cannot split it", holder, Table, retention.MonthString(month))
	}
	stmt := fmt.Sprintf("ALTER TABLE %s REORGANIZE PARTITION %s INTO (PARTITION %s VALUES LESS THAN ('%s'), PARTITION %s VALUES LESS THAN (%s))",
		quote(Table), quote(holder), quote(name), to.Format(time.DateOnly), quote(holder), holderDesc)
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	if _, err := s.db.ExecContext(ctx, stmt); err != nil {
		return retention.Partition{}, fmt.Errorf("create partition %s: %w", name, err)
	}
	p, ok, err := find()
	if err != nil {
		return p, err
	}
	if !ok {
		return p, fmt.Errorf("partition %s: %w", name, retention.ErrNotFound)
	}
	return p, nil
}

// Insert restores rows into table, leaving rows whose primary key exists as
// they are.
func (s *Source) Insert(ctx context.Context, table string, cols []retention.Column, lines [][]byte) (int64, error) {
	if len(lines) == 0 {
		return 0, nil
	}
	pk, err := s.primaryKey(ctx, table)
	if err != nil {
		return 0, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quote(c.Name)
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + ")"
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", quote(table), strings.Join(names, ", "))
	args := make([]any, 0, len(cols)*len(lines))
	for i, l := range lines {
		var row map[string]*string
		if err := json.Unmarshal(l, &row); err != nil {
			return 0, fmt.Errorf("restore into %s: row %d: %w", table, i, err)
		}
		for _, c := range cols {
			v := row[c.Name]
			switch {
			case v == nil:
				args = append(args, nil)
			case c.Binary:
				raw, err := base64.StdEncoding.DecodeString(*v)
				if err != nil {
					return 0, fmt.Errorf("restore into %s: column %s: %w", table, c.Name, err)
				}
				args = append(args, raw)
			default:
				args = append(args, *v)
			}
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(one)
	}
	fmt.Fprintf(&b, " ON DUPLICATE KEY UPDATE %s = %s", quote(pk[0]), quote(pk[0]))
	// sql: identifiers only, quoted by quote(); dates are formatted by the program; values are arguments.
	res, err := s.db.ExecContext(ctx, b.String(), args...)
	if err != nil {
		return 0, fmt.Errorf("restore into %s: %w", table, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Lock takes the audit DB's named retention lock on a connection held until
// unlock, or returns retention.ErrBusy.
func (s *Source) Lock(ctx context.Context) (func(), error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(DATABASE(), '.', ?), 0)", lockName).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, retention.ErrBusy
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.', ?))", lockName)
		conn.Close()
	}, nil
}
