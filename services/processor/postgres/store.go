// Package postgres is the processor's adapter to the events DB: it writes
// batches of events exactly once with their facts and their counts in
// every rollup (rollups.go), keeps the monthly partitions ahead, and holds
// the leader lock.
//
// How far "exactly once" holds. An event id is unique within its app (two
// apps may send the same event_id without affecting each other), so the
// unique key of events.events is (id, app_id, received_at): a unique key
// of a partitioned table must include the partition key. So a redelivered
// message (same received_at) is always a conflict, whatever its age. A
// client re-send of the same event_id gets a new received_at from the
// collector; it is skipped when a row with that id and app exists with
// received_at at or after the first instant of the
// calendar month (UTC) before the month of the earliest event of the batch.
// In other words a re-send is stored once when the first copy was received
// in the same or the previous UTC month: at least 28 days apart, up to about
// 62. Older first copies are not looked at (their partition may be archived
// and dropped) and the re-send would be stored again. Nor are copies
// received more than processor.MaxReceivedAhead after now, which no
// processor stores. Two writers (a leader hand-over, shards) cannot both
// miss each other's copy: each takes its batch's apps' locks
// (events.lock_apps) before its insert statement, which then sees the
// other's committed copy.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/wire"
	"threatview/processor"
)

// Store is the events DB. It is safe for concurrent use, and any number of
// Stores may write one database (one per shard): writers of the same app
// wait for each other (events.lock_apps). device_models_dim is filled
// without a lock: a concurrent writer adding the same model only makes a
// batch fail and be retried, never miscount.
type Store struct {
	pool *pgxpool.Pool
	held atomic.Uint64 // events held in events.late_events (late.go)
	// outbox is whether a threat event also gets its alerts.outbox row
	// (insertOutboxSQL); off when no alerts service reads and prunes it.
	outbox bool
	// beforeCommit, when set (tests only), runs after a write's statements
	// and before its commit.
	beforeCommit func()
}

// batchTable is the session's temporary table COPY fills; ON COMMIT DELETE
// ROWS empties it at the end of every transaction that used it, and a
// rollback discards what was copied.
const batchTable = `CREATE TEMP TABLE IF NOT EXISTS batch_events (
	id uuid, received_at timestamptz, occurred_at timestamptz, type text, app_id text,
	app_version text, device_id text, device_model text, manufacturer text, os text,
	os_version text, country char(2), client_ip inet, token_id text, request_id text,
	payload jsonb, session_id text, user_pseudonym text, language text, os_major smallint,
	os_minor smallint, lat real, lon real, threat_types text[]
) ON COMMIT DELETE ROWS`

var batchColumns = []string{"id", "received_at", "occurred_at", "type", "app_id",
	"app_version", "device_id", "device_model", "manufacturer", "os",
	"os_version", "country", "client_ip", "token_id", "request_id", "payload",
	"session_id", "user_pseudonym", "language", "os_major", "os_minor", "lat", "lon",
	"threat_types"}

// writerWorkMem is each pool session's work_mem.
const writerWorkMem = "32MB"

// connectTimeout bounds a connection attempt when the URL sets none.
const connectTimeout = 5 * time.Second

// Open connects a pool of at most maxConns connections to the events DB at
// url and checks it answers; its alerts outbox rows are shard 0's.
func Open(ctx context.Context, url string, maxConns int32) (*Store, error) {
	return OpenShard(ctx, url, maxConns, 0)
}

// OpenShard is Open for the processor of events shard shard: every
// session of the pool starts with threatview.shard set to it, so its
// alerts.outbox rows carry it and their commit-order lock is the shard's
// own (migration 000023), and the shards' writers do not wait for each
// other's commits. A startup parameter, it costs no statement per
// transaction.
func OpenShard(ctx context.Context, url string, maxConns int32, shard int) (*Store, error) {
	if shard < 0 || shard > math.MaxInt16 {
		return nil, fmt.Errorf("events shard %d: not 0 to %d", shard, math.MaxInt16)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse EVENTS_DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["threatview.shard"] = strconv.Itoa(shard)
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		// The ack that follows a commit promises the events survive a
		// database crash, whatever the server's or role's default says.
		// work_mem: the batch statement's hashes and sorts (a few MB for a
		// batch of 8,000) stay in memory; at most DBMaxConns sessions.
		_, err := c.Exec(ctx, "SET synchronous_commit = on; SET work_mem = '"+writerWorkMem+"'; "+batchTable)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open events DB: %w", err)
	}
	return &Store{pool: pool, outbox: true}, nil
}

// WithoutOutbox stops the store writing alerts.outbox rows: with the alerts
// service off nothing reads or prunes them. Call it before the first write.
func (s *Store) WithoutOutbox() *Store {
	s.outbox = false
	return s
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks the database answers (for /readyz).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping events DB: %w: %w", processor.ErrUnavailable, err)
	}
	return nil
}

// insertSQL moves the copied batch (already free of repeats: prepare) into
// events.events and, for the rows actually inserted, writes the facts, any
// new device model, the investigation rollups and, in insertOutboxSQL, the
// alerts.outbox rows, all in one statement; it returns the id, app and
// device model id of each inserted row, from which the writer folds the
// rollups (rollups.go). $1 and $2 bound the duplicate probe to the
// partitions an earlier copy can live in (see the package comment).
//
// An event of a suppressed device (events.suppressions, not lifted) is not
// inserted: the check is in the statement, so a processor whose cached set
// is stale still drops it, and the app's lock (events.lock_apps, taken
// before this statement and by a suppression's insert) orders the two.
//
// A model missing from device_models_dim after the upsert (only possible
// with a concurrent writer) leaves device_model_id NULL, which the NOT NULL
// constraint turns into an error and a retry rather than a lost fact.
var insertSQL, insertOutboxSQL = insertStatement(false), insertStatement(true)

func insertStatement(outbox bool) string {
	outboxed := ""
	if outbox {
		// The outbox's statement trigger takes an advisory lock held to
		// COMMIT (commit order, migration 000011): only a batch with a
		// threat event and the outbox on runs this insert at all.
		outboxed = `, outboxed AS (
	-- A threat event's row for the alerts service (its forwarders and
	-- minute counts): in this transaction, so it exists iff the event does.
	INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, app_version,
		device_model, os, os_version, country, threats)
	SELECT i.id, i.app_id, i.received_at, i.occurred_at, i.type, coalesce(i.app_version, ''),
		coalesce(i.device_model, ''), coalesce(i.os, ''), coalesce(i.os_version, ''),
		coalesce(i.country, ''), i.threat_types
	FROM ins i
	WHERE cardinality(i.threat_types) > 0
)`
	}
	return `
WITH ins AS (
	INSERT INTO events.events (id, received_at, occurred_at, type, app_id, app_version, device_id,
		device_model, manufacturer, os, os_version, country, client_ip, token_id, request_id, payload,
		session_id, user_pseudonym, language, os_major, os_minor, lat, lon, threat_types)
	SELECT s.id, s.received_at, s.occurred_at, s.type, s.app_id, s.app_version, s.device_id,
		s.device_model, s.manufacturer, s.os, s.os_version, s.country, s.client_ip, s.token_id,
		s.request_id, s.payload, s.session_id, s.user_pseudonym, s.language, s.os_major, s.os_minor,
		s.lat, s.lon, s.threat_types
	FROM batch_events s
	-- OFFSET 0 keeps this a per-row probe of each partition's primary key:
	-- without it the planner may pull it up into an anti join that reads
	-- whole partitions (the temporary table has no statistics).
	WHERE NOT EXISTS (SELECT 1 FROM events.events e
		WHERE e.id = s.id AND e.app_id = s.app_id AND e.received_at >= $1 AND e.received_at < $2 OFFSET 0)
	  AND NOT EXISTS (SELECT 1 FROM events.suppressions x
		WHERE x.app_id = s.app_id AND x.device_id = s.device_id AND x.lifted_at IS NULL)
	-- No ON CONFLICT (its speculative insertion cost ~14 % of the
	-- statement): the probe sees every committed copy with the same key
	-- (same received_at: inside the window), and the app's lock makes
	-- every other writer's copy committed. A writer that skips the lock
	-- (none does) would make a unique violation, retried (isPermanent).
	RETURNING id, received_at, occurred_at, type, app_id, app_version, country, manufacturer,
		device_model, os, os_version, device_id, user_pseudonym, os_major, os_minor, lat, lon,
		threat_types
), ` + investigationCTEs + outboxed + `, models AS (
	SELECT DISTINCT manufacturer, device_model AS model FROM ins
), new_models AS (
	INSERT INTO facts.device_models_dim (manufacturer, model)
	SELECT m.manufacturer, m.model FROM models m
	WHERE NOT EXISTS (SELECT 1 FROM facts.device_models_dim d
		WHERE d.manufacturer = m.manufacturer AND d.model = m.model)
	ON CONFLICT (manufacturer, model) DO NOTHING
	RETURNING id, manufacturer, model
), dims AS (
	SELECT id, manufacturer, model FROM new_models
	UNION ALL
	SELECT d.id, d.manufacturer, d.model FROM facts.device_models_dim d
	JOIN models m ON d.manufacturer = m.manufacturer AND d.model = m.model
), fact_rows AS (
	INSERT INTO facts.facts (event_id, received_at, occurred_at, app_id, country, device_model_id, os, threats)
	SELECT i.id, i.received_at, i.occurred_at, i.app_id, i.country, d.id, i.os, i.threat_types
	FROM ins i LEFT JOIN dims d ON d.manufacturer = i.manufacturer AND d.model = i.device_model
	RETURNING event_id, app_id, device_model_id
)
SELECT event_id, app_id, device_model_id FROM fact_rows`
}

// WriteBatch stores events in one transaction: COPY into the session's
// temporary table, then insertSQL. Events already stored (see the package
// comment) and repeats within the batch are skipped and counted as
// duplicates. A missing partition (received_at in a month not created yet)
// is created and the batch retried once; events of a month that was
// archived and dropped are held in events.late_events instead (late.go) and
// counted as stored. Errors wrap ErrUnavailable.
func (s *Store) WriteBatch(ctx context.Context, events []wire.Event) (processor.WriteResult, error) {
	if len(events) == 0 {
		return processor.WriteResult{}, nil
	}
	lo, hi := receivedRange(events)
	n, err := s.write(ctx, events, prevMonth(lo))
	if isNoPartition(err) {
		if perr := s.ensurePartitions(ctx, lo, hi); perr != nil {
			return processor.WriteResult{}, fmt.Errorf("write batch of %d events: %w: %w", len(events), processor.ErrUnavailable, perr)
		}
		n, err = s.write(ctx, events, prevMonth(lo))
		if isNoPartition(err) {
			// A month archived and dropped is never re-created (late.go).
			rest, held, dups, herr := s.holdLate(ctx, events)
			if herr != nil {
				return processor.WriteResult{}, fmt.Errorf("write batch of %d events: %w: %w", len(events), processor.ErrUnavailable, herr)
			}
			n, err = 0, nil
			if len(rest) > 0 {
				n, err = s.write(ctx, rest, prevMonth(lo))
			}
			if err == nil {
				return processor.WriteResult{Stored: n + held, Duplicates: len(rest) - n + dups}, nil
			}
		}
	}
	if isPermanent(err) {
		return processor.WriteResult{}, fmt.Errorf("write batch of %d events: %w: %w", len(events), processor.ErrUnstorable, err)
	}
	if err != nil {
		return processor.WriteResult{}, fmt.Errorf("write batch of %d events: %w: %w", len(events), processor.ErrUnavailable, err)
	}
	return processor.WriteResult{Stored: n, Duplicates: len(events) - n}, nil
}

func (s *Store) write(ctx context.Context, events []wire.Event, since time.Time) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	n, err := s.insert(ctx, tx, events, since)
	if err != nil {
		return 0, err
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}

func receivedRange(events []wire.Event) (lo, hi time.Time) {
	lo, hi = events[0].ReceivedAt, events[0].ReceivedAt
	for i := 1; i < len(events); i++ {
		t := events[i].ReceivedAt
		if t.Before(lo) {
			lo = t
		}
		if t.After(hi) {
			hi = t
		}
	}
	return lo, hi
}

// prevMonth returns the first instant (UTC) of the month before t's month.
func prevMonth(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()-1, 1, 0, 0, 0, 0, time.UTC)
}

// isPermanent reports an error the rows themselves cause, so that writing
// the same rows again can never succeed: SQLSTATE class 21 (cardinality
// violation), 22 (data exception: a value Postgres refuses, such as an
// invalid jsonb escape), 23 (integrity constraint violation: a unique
// violation from a facts partition whose events partition was dropped) and
// 54 (program limit exceeded: max_stack_depth on a deeply nested document),
// and a row the driver could not encode. Everything else (a lost
// connection, a serialization failure or deadlock, a lock timeout, a full
// disk, a missing privilege or table an operator will fix) is transient and
// retried: it says nothing about the rows, and treating it as permanent
// would dead-letter every request in turn.
func isPermanent(err error) bool {
	if errors.Is(err, errEncode) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	switch pgErr.Code[:2] {
	case "21", "22", "54":
		return true
	case "23":
		// Not 23502: a NULL device_model_id means a concurrent writer
		// raced the dimension upsert (see insertSQL), and a retry succeeds.
		// Not a unique violation of an events partition's key: a copy
		// committed while the statement ran, which the retry's probe skips.
		if pgErr.Code == "23505" && strings.HasPrefix(pgErr.ConstraintName, "events_") && strings.HasSuffix(pgErr.ConstraintName, "_pkey") {
			return false
		}
		return pgErr.Code != "23502" && !isNoPartition(err)
	}
	return false
}

// errEncode marks a row the driver cannot encode.
var errEncode = errors.New("cannot encode row")

func isNoPartition(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && strings.Contains(pgErr.Message, "no partition")
}

func (s *Store) ensurePartitions(ctx context.Context, lo, hi time.Time) error {
	lo, hi = lo.UTC(), hi.UTC()
	months := (hi.Year()-lo.Year())*12 + int(hi.Month()-lo.Month())
	if months > 24 {
		// The consumer keeps received_at within about a year of now
		// (processor.CheckStorable); anything wider is a bug, not a backlog.
		return fmt.Errorf("refusing to create %d monthly partitions for %s..%s", months+1, lo.Format("2006-01"), hi.Format("2006-01"))
	}
	_, err := s.pool.Exec(ctx, `SELECT events.ensure_monthly_partitions('events.events', $1, $2),
		events.ensure_monthly_partitions('facts.facts', $1, $2)`, lo, months)
	if err != nil {
		return fmt.Errorf("create partitions %s..%s: %w", lo.Format("2006-01"), hi.Format("2006-01"), err)
	}
	return nil
}

// MaintainPartitions creates the partitions of the current month and ahead
// months after it; it returns how many it created.
func (s *Store) MaintainPartitions(ctx context.Context, ahead int) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT events.maintain_partitions($1)", ahead).Scan(&n); err != nil {
		return 0, fmt.Errorf("maintain partitions: %w: %w", processor.ErrUnavailable, err)
	}
	return n, nil
}

// rows feeds a batch to COPY without building a [][]any: pgx encodes each
// row before asking for the next, so one row slice and one payload buffer
// are reused.
type rows struct {
	events  []wire.Event
	threats [][]string // per event (prepare); nil: NULL
	i       int
	row     [24]any
	payload []byte
	err     error
}

func newRows(events []wire.Event) *rows { return &rows{events: events, i: -1} }

func (r *rows) Next() bool {
	r.i++
	return r.i < len(r.events)
}

func (r *rows) Err() error { return r.err }

func (r *rows) Values() ([]any, error) {
	e := &r.events[r.i]
	id, ok := parseUUID(e.ID)
	if !ok {
		return nil, fmt.Errorf("%w: event %d: id %q is not a UUID", errEncode, r.i, e.ID)
	}
	var ip any
	if a, err := netip.ParseAddr(e.ClientIP); err == nil {
		ip = a
	}
	var payload any
	if p := appendPayload(r.payload[:0], e); p != nil {
		r.payload = p
		payload = p
	}
	var threats any
	if r.threats != nil {
		threats = r.threats[r.i]
	}
	r.row = [24]any{id, e.ReceivedAt, e.OccurredAt, e.Type, e.App.ID,
		e.App.Version, e.Device.ID, e.Device.Model, e.Device.Manufacturer, e.Device.OS,
		e.Device.OSVersion, e.Country, ip, e.TokenID, e.RequestID, payload}
	investigationValues(e, r.row[16:23])
	r.row[23] = threats
	return r.row[:], nil
}

// appendPayload appends the jsonb payload of e (threats, attributes, sent_at,
// original_occurred_at when present) to buf, or returns nil when e has none.
func appendPayload(buf []byte, e *wire.Event) []byte {
	sep := byte('{')
	field := func(name string) {
		buf = append(buf, sep, '"')
		buf = append(buf, name...)
		buf = append(buf, '"', ':')
		sep = ','
	}
	if len(e.Threats) > 0 && string(e.Threats) != "null" {
		field("threats")
		buf = append(buf, e.Threats...)
	}
	if len(e.Attributes) > 0 && string(e.Attributes) != "null" {
		field("attributes")
		buf = append(buf, e.Attributes...)
	}
	if e.SentAt != nil {
		field("sent_at")
		buf = append(buf, '"')
		buf = e.SentAt.UTC().AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, '"')
	}
	if e.OriginalOccurredAt != nil {
		field("original_occurred_at")
		buf = append(buf, '"')
		buf = e.OriginalOccurredAt.UTC().AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, '"')
	}
	if sep == '{' {
		return nil
	}
	return append(buf, '}')
}

// parseUUID parses the canonical 8-4-4-4-12 form (already checked by
// wire.DecodeEventBatch).
func parseUUID(s string) (pgtype.UUID, bool) {
	var u pgtype.UUID
	if len(s) != 36 {
		return u, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return u, false
			}
			i++
			continue
		}
		h, ok1 := unhex(s[i])
		l, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u.Bytes[j] = h<<4 | l
		j++
		i += 2
	}
	u.Valid = true
	return u, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
