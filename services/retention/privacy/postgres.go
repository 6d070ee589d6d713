package privacy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/invkeys"
)

// PG is the events DB side: the erasures and suppressions tables and the
// erasure of events, late events, facts and rollups.
type PG struct {
	pool *pgxpool.Pool
}

// NewPG returns the events DB adapter over pool.
func NewPG(pool *pgxpool.Pool) *PG { return &PG{pool: pool} }

func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

const erasureCols = `id::text, app_id, device_id, user_pseudonyms, suppress, status, requested_by, requested_at,
	started_at, finished_at, attempts, report, error,
	CASE WHEN status = 'running' AND next_attempt_at > now() THEN next_attempt_at END`

func scanErasure(row pgx.Row) (*Erasure, error) {
	var e Erasure
	err := row.Scan(&e.ID, &e.AppID, &e.DeviceID, &e.UserPseudonyms, &e.Suppress, &e.Status, &e.RequestedBy, &e.RequestedAt,
		&e.StartedAt, &e.FinishedAt, &e.Attempts, &e.Report, &e.Error, &e.NextAttemptAt)
	return &e, err
}

// Create implements Store.
func (p *PG) Create(ctx context.Context, e *Erasure) error {
	var known bool
	err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events.events WHERE app_id = $1)
		OR EXISTS (SELECT 1 FROM events.late_events WHERE app_id = $1)
		OR EXISTS (SELECT 1 FROM facts.events_by_country_per_month WHERE app_id = $1)`, e.AppID).Scan(&known)
	if err != nil {
		return unavailable("check app", err)
	}
	if !known {
		return fmt.Errorf("app %q: %w", e.AppID, ErrUnknownApp)
	}
	row := p.pool.QueryRow(ctx, `INSERT INTO events.erasures (id, app_id, device_id, user_pseudonyms, suppress, status, requested_by)
		VALUES ($1, $2, $3, coalesce($4::text[], '{}'), $5, 'pending', $6) RETURNING `+erasureCols,
		e.ID, e.AppID, e.DeviceID, e.UserPseudonyms, e.Suppress, e.RequestedBy)
	got, err := scanErasure(row)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("app %q subject: %w", e.AppID, ErrBusy)
	}
	if err != nil {
		return unavailable("create erasure", err)
	}
	*e = *got
	return nil
}

// Queue implements Store.
func (p *PG) Queue(ctx context.Context, e *Erasure) error {
	tag, err := p.pool.Exec(ctx, `UPDATE events.erasures SET status = 'queued', next_attempt_at = now()
		WHERE id = $1 AND status = 'pending'`, e.ID)
	if err != nil {
		return unavailable("queue erasure", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("erasure %s is no longer pending: %w", e.ID, ErrNotFound)
	}
	e.Status = StatusQueued
	return nil
}

// Delete implements Store: only a pending erasure is withdrawn, and no
// job suppresses a pending subject, so nothing of it is left.
func (p *PG) Delete(ctx context.Context, id string) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM events.erasures WHERE id = $1 AND status = 'pending'`, id); err != nil {
		return unavailable("delete erasure", err)
	}
	return nil
}

// pendingFor is how long a pending erasure may wait for its audit record
// (at most 5 s, the API's audit timeout) before SweepPending removes it.
const pendingFor = time.Minute

// SweepPending removes erasures left pending by a process that stopped
// between storing and auditing them (their client got no answer) and
// returns how many.
func (p *PG) SweepPending(ctx context.Context) (int64, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM events.erasures WHERE status = 'pending' AND requested_at < now() - $1::interval`, pendingFor)
	if err != nil {
		return 0, unavailable("sweep pending erasures", err)
	}
	return tag.RowsAffected(), nil
}

// Get implements Store.
func (p *PG) Get(ctx context.Context, id string) (*Erasure, error) {
	e, err := scanErasure(p.pool.QueryRow(ctx, `SELECT `+erasureCols+` FROM events.erasures WHERE id = $1 AND status <> 'pending'`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable("get erasure", err)
	}
	return e, nil
}

// List implements Store.
func (p *PG) List(ctx context.Context, limit int) ([]Erasure, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+erasureCols+` FROM events.erasures WHERE status <> 'pending' ORDER BY requested_at DESC LIMIT $1`, limit)
	if err != nil {
		return nil, unavailable("list erasures", err)
	}
	defer rows.Close()
	out := []Erasure{}
	for rows.Next() {
		e, err := scanErasure(rows)
		if err != nil {
			return nil, unavailable("list erasures", err)
		}
		out = append(out, *e)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list erasures", err)
	}
	return out, nil
}

// LiftSuppression implements Store.
func (p *PG) LiftSuppression(ctx context.Context, s Subject, by string) error {
	return p.lift(ctx, s, by, "")
}

// CheckLift implements Store.
func (p *PG) CheckLift(ctx context.Context, s Subject) error {
	var active, busy bool
	err := p.pool.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM events.suppressions WHERE app_id = $1 AND device_id = $2 AND lifted_at IS NULL),
		EXISTS (SELECT 1 FROM events.erasures WHERE app_id = $1 AND device_id = $2 AND status IN ('pending', 'queued', 'running'))`,
		s.AppID, s.DeviceID).Scan(&active, &busy)
	switch {
	case err != nil:
		return unavailable("check suppression", err)
	case busy:
		return fmt.Errorf("lift suppression: %w", ErrBusy)
	case !active:
		return ErrNotFound
	}
	return nil
}

// lift ends s's suppression unless an erasure of s other than the one
// with id except (blank: none) is open: lifting it mid-erasure would let
// the device's events be stored again while they are being deleted.
// The check and the update are one statement.
func (p *PG) lift(ctx context.Context, s Subject, by, except string) error {
	var lifted, busy bool
	err := p.pool.QueryRow(ctx, `WITH open AS (
			SELECT 1 FROM events.erasures WHERE app_id = $1 AND device_id = $2
			   AND status IN ('pending', 'queued', 'running') AND id::text <> $4
		), u AS (
			UPDATE events.suppressions SET lifted_at = now(), lifted_by = $3
			 WHERE app_id = $1 AND device_id = $2 AND lifted_at IS NULL AND NOT EXISTS (SELECT 1 FROM open)
			RETURNING 1
		)
		SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM open)`, s.AppID, s.DeviceID, by, except).Scan(&lifted, &busy)
	switch {
	case err != nil:
		return unavailable("lift suppression", err)
	case busy:
		return fmt.Errorf("lift suppression: %w", ErrBusy)
	case !lifted:
		return ErrNotFound
	}
	return nil
}

// Suppressions implements Store.
func (p *PG) Suppressions(ctx context.Context) ([]Suppression, error) {
	rows, err := p.pool.Query(ctx, `SELECT app_id, device_id, created_at, created_by, coalesce(erasure_id::text, '')
		FROM events.suppressions WHERE lifted_at IS NULL ORDER BY created_at DESC LIMIT 1000`)
	if err != nil {
		return nil, unavailable("list suppressions", err)
	}
	defer rows.Close()
	out := []Suppression{}
	for rows.Next() {
		var s Suppression
		if err := rows.Scan(&s.AppID, &s.DeviceID, &s.CreatedAt, &s.CreatedBy, &s.ErasureID); err != nil {
			return nil, unavailable("list suppressions", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Claim takes the queued or running erasure due first (next_attempt_at;
// one left running by a runner that stopped is due at once, one whose
// last try failed after its backoff; only the holder of the runner lock
// claims), and marks it running. It returns nil when none is due.
func (p *PG) Claim(ctx context.Context) (*Erasure, error) {
	e, err := scanErasure(p.pool.QueryRow(ctx, `UPDATE events.erasures SET status = 'running',
		started_at = coalesce(started_at, now()), attempts = attempts + 1
		WHERE id = (SELECT id FROM events.erasures WHERE status IN ('queued', 'running') AND next_attempt_at <= now()
			ORDER BY next_attempt_at, requested_at LIMIT 1)
		RETURNING `+erasureCols))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("claim erasure", err)
	}
	return e, nil
}

// Retry records a try that failed for a transient reason: the erasure
// stays running, with its report so far and the error, and is not
// claimed again before delay has passed.
func (p *PG) Retry(ctx context.Context, e *Erasure, delay time.Duration) error {
	_, err := p.pool.Exec(ctx, `UPDATE events.erasures SET next_attempt_at = now() + $2::interval, report = $3, error = $4
		WHERE id = $1 AND status = 'running'`, e.ID, delay, e.Report, e.Error)
	if err != nil {
		return unavailable("record erasure retry", err)
	}
	return nil
}

// Open is the state of the open erasures, for the runner's metrics.
type Open struct {
	// Count is how many are queued or running; Retrying how many of them
	// wait out a backoff.
	Count, Retrying int64
	// OldestSeconds is the age of the oldest (0 with none).
	OldestSeconds float64
}

// OpenStats returns the state of the open erasures.
func (p *PG) OpenStats(ctx context.Context) (Open, error) {
	var o Open
	err := p.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'running' AND next_attempt_at > now()),
		coalesce(extract(epoch FROM now() - min(requested_at)), 0)::float8
		FROM events.erasures WHERE status IN ('queued', 'running')`).Scan(&o.Count, &o.Retrying, &o.OldestSeconds)
	if err != nil {
		return o, unavailable("open erasures", err)
	}
	return o, nil
}

// Finish records an erasure's end (done or failed) with its report.
func (p *PG) Finish(ctx context.Context, e *Erasure) error {
	_, err := p.pool.Exec(ctx, `UPDATE events.erasures SET status = $2, finished_at = now(), report = $3, error = $4,
		next_attempt_at = now() WHERE id = $1`,
		e.ID, e.Status, e.Report, e.Error)
	if err != nil {
		return unavailable("finish erasure", err)
	}
	return nil
}

// suppressUpsert ends Suppress's inserts: a subject already under
// suppression keeps its start, one whose suppression was lifted is
// suppressed again from now.
const suppressUpsert = ` ON CONFLICT (app_id, device_id) DO UPDATE SET lifted_at = NULL, lifted_by = NULL,
	created_at = CASE WHEN events.suppressions.lifted_at IS NULL THEN events.suppressions.created_at ELSE now() END,
	created_by = excluded.created_by, erasure_id = excluded.erasure_id`

// Suppress puts the device under suppression (again, if it was lifted)
// and, so that a queue of erasures waits out the settle time once and not
// once each, the devices of every queued erasure too (a user erasure has
// none: the processor suppresses devices only). It returns when the
// device's suppression began.
func (p *PG) Suppress(ctx context.Context, e *Erasure) (time.Time, error) {
	if _, err := p.pool.Exec(ctx, `INSERT INTO events.suppressions (app_id, device_id, created_by, erasure_id)
		SELECT app_id, device_id, requested_by, id FROM events.erasures WHERE status = 'queued' AND device_id <> ''`+suppressUpsert); err != nil {
		return time.Time{}, unavailable("suppress queued", err)
	}
	var since time.Time
	err := p.pool.QueryRow(ctx, `INSERT INTO events.suppressions (app_id, device_id, created_by, erasure_id)
		VALUES ($1, $2, $3, $4)`+suppressUpsert+` RETURNING created_at`,
		e.AppID, e.DeviceID, e.RequestedBy, e.ID).Scan(&since)
	if err != nil {
		return time.Time{}, unavailable("suppress", err)
	}
	return since, nil
}

// eraseSettings start every erasure transaction: a lock waited for at
// most 5 s, and index probes rather than hashes or sorts of whole
// partitions.
const eraseSettings = "SET LOCAL lock_timeout = '5s'; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; "

// texts returns lines as strings (a text[] argument).
func texts(lines [][]byte) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l)
	}
	return out
}

// erasedFacts is the session's table of one batch's deleted facts, from
// which the rollups are decremented; emptied at commit.
const erasedFacts = `CREATE TEMP TABLE IF NOT EXISTS erased_facts (
	occurred_at timestamptz, app_id text, country char(2), device_model_id integer, os text, threats text[]
) ON COMMIT DELETE ROWS`

// eraseEventsSQL deletes at most $3 events of the subject (any partition:
// by device the index events_by_subject on (app_id, device_id), by user
// events_by_user on (user_pseudonym, ...) on each) and their facts, and
// keeps the facts and the events' investigation keys' columns for the
// decrements. It returns the events and facts deleted. %[1]s is the
// subject's column (subjectColumn).
const eraseEventsSQL = `
WITH victims AS (
	SELECT id, received_at FROM events.events WHERE app_id = $1 AND %[1]s = $2 LIMIT $3
), del AS (
	DELETE FROM events.events e USING victims v
	WHERE e.id = v.id AND e.received_at = v.received_at AND e.app_id = $1 AND e.%[1]s = $2
	RETURNING e.id, e.received_at, ` + invkeys.Columns + `
), ekept AS (
	INSERT INTO erased_events SELECT ` + invkeys.Columns + ` FROM del RETURNING 1
), fdel AS (
	DELETE FROM facts.facts f USING del d
	WHERE f.event_id = d.id AND f.received_at = d.received_at AND f.app_id = $1
	RETURNING f.occurred_at, f.app_id, f.country, f.device_model_id, f.os, f.threats
), kept AS (
	INSERT INTO erased_facts SELECT * FROM fdel RETURNING 1
)
SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM kept)`

// decrementSQL subtracts erased_facts from the twelve per-app rollups and
// their twelve all-apps summaries (the processor's rollup upserts, negated:
// same buckets, same keys; over all apps in shard 0's row), then removes the
// rows left at zero, so every
// rollup stays equal to a count(*) over the remaining events. Rows are
// locked in key order, as the processor sends its upserts, so the two never
// deadlock.
var decrementSQL = func() []string {
	grains := []struct{ table, bucket string }{
		{"hour", "date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"},
		{"day", "(occurred_at AT TIME ZONE 'UTC')::date"},
		{"month", "date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date"},
	}
	keys := []struct{ table, col, expr, from string }{
		{"country", "country", "country", "erased_facts"},
		{"device_model", "device_model_id", "device_model_id", "erased_facts"},
		{"os", "os", "os", "erased_facts"},
		{"threat", "threat", "x.threat", "erased_facts s, unnest(s.threats) AS x(threat)"},
	}
	var out []string
	for _, k := range keys {
		for _, g := range grains {
			out = append(out, fmt.Sprintf(`WITH d AS (SELECT app_id, %[3]s AS bucket, %[4]s AS k, count(*) AS n FROM %[5]s GROUP BY 1, 2, 3),
l AS (SELECT t.app_id, t.bucket, t.%[2]s FROM facts.events_by_%[1]s t JOIN d ON t.app_id = d.app_id AND t.bucket = d.bucket AND t.%[2]s = d.k ORDER BY 1, 2, 3 FOR UPDATE OF t),
u AS (UPDATE facts.events_by_%[1]s t SET count = t.count - d.n FROM d WHERE t.app_id = d.app_id AND t.bucket = d.bucket AND t.%[2]s = d.k AND (SELECT count(*) FROM l) >= 0 RETURNING t.count)
SELECT count(*), count(*) FILTER (WHERE count <= 0) FROM u`, k.table+"_per_"+g.table, k.col, g.bucket, k.expr, k.from),
				// A summary over all apps has a row per shard (migration
				// 000024), and which shard counted an event is not kept:
				// the decrement goes into shard 0's row, which may go
				// below zero while the key's sum, what readers see, is
				// exact. A key counts as at zero when its sum before, less
				// the decrement, is.
				fmt.Sprintf(`WITH d AS (SELECT %[3]s AS bucket, %[4]s AS k, count(*) AS n FROM %[5]s GROUP BY 1, 2),
u AS (INSERT INTO facts.all_apps_events_by_%[1]s AS t (bucket, %[2]s, shard, count)
	SELECT bucket, k, 0, -n FROM d ORDER BY 1, 2
	ON CONFLICT (bucket, %[2]s, shard) DO UPDATE SET count = t.count + excluded.count
	RETURNING t.bucket, t.%[2]s AS k)
SELECT count(*), count(*) FILTER (WHERE d.n >= (SELECT coalesce(sum(a.count), 0) FROM facts.all_apps_events_by_%[1]s a
	WHERE a.bucket = d.bucket AND a.%[2]s = d.k)) FROM u JOIN d ON u.bucket = d.bucket AND u.k = d.k`, k.table+"_per_"+g.table, k.col, g.bucket, k.expr, k.from))
			// Only the rows this batch touched can have reached 0.
			out = append(out,
				fmt.Sprintf(`DELETE FROM facts.events_by_%[1]s t USING (SELECT DISTINCT app_id, %[3]s AS bucket, %[4]s AS k FROM %[5]s) d
WHERE t.app_id = d.app_id AND t.bucket = d.bucket AND t.%[2]s = d.k AND t.count <= 0`, k.table+"_per_"+g.table, k.col, g.bucket, k.expr, k.from),
				// Only shard 0's row, and only at exactly zero: a row
				// below zero balances another shard's, and deleting
				// another shard's row on the key's sum would race its
				// writer (the sum is not re-read when the row changes).
				fmt.Sprintf(`DELETE FROM facts.all_apps_events_by_%[1]s t USING (SELECT DISTINCT %[3]s AS bucket, %[4]s AS k FROM %[5]s) d
WHERE t.bucket = d.bucket AND t.%[2]s = d.k AND t.shard = 0 AND t.count = 0`, k.table+"_per_"+g.table, k.col, g.bucket, k.expr, k.from))
		}
	}
	return out
}()

// Batch is what one batch of EraseEvents did. DeviceDays and DailyUsers
// are the rows of facts.inv_device_days and inv_daily_users that no
// remaining event makes any more (the other devices of an erased user,
// the users of an erased device).
type Batch struct {
	Events, Facts, RollupRows, RollupRowsRemoved, DeviceDays, DailyUsers int64
}

// EraseEvents deletes at most n of the subject's events, their facts and
// their counts in every rollup (the investigation rollups included), in
// one transaction holding the app's writer lock.
func (p *PG) EraseEvents(ctx context.Context, s Subject, n int) (Batch, error) {
	var b Batch
	col, err := subjectColumn(s)
	if err != nil {
		return b, err
	}
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, eraseSettings+
			erasedFacts+"; "+erasedEvents); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lockApp, s.AppID); err != nil {
			return fmt.Errorf("lock app: %w", err)
		}
		// sql: col is subjectColumn's constant (device_id or user_pseudonym); every value is an argument.
		if err := tx.QueryRow(ctx, fmt.Sprintf(eraseEventsSQL, col), s.AppID, s.key(), n).Scan(&b.Events, &b.Facts); err != nil {
			return fmt.Errorf("delete events: %w", err)
		}
		if b.Events == 0 {
			return nil
		}
		if b.Facts > 0 {
			if err := decrement(ctx, tx, &b); err != nil {
				return err
			}
		}
		return decrementInv(ctx, tx, s.AppID, col, &b)
	})
	if err != nil {
		return Batch{}, unavailable("erase events", err)
	}
	return b, nil
}

// decrement subtracts the facts in erased_facts from every rollup (the 48
// statements of decrementSQL in one round trip, a pipeline, in order) and
// counts the rows adjusted and removed into b.
func decrement(ctx context.Context, tx pgx.Tx, b *Batch) error {
	batch := &pgx.Batch{}
	for _, q := range decrementSQL {
		queueDecrement(batch, q, !strings.HasPrefix(q, "DELETE"), b)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("adjust rollups: %w", err)
	}
	return nil
}

// queueDecrement queues one decrement statement: an adjusting one answers
// (rows adjusted, rows at zero), counted into b; a removal answers nothing.
func queueDecrement(batch *pgx.Batch, q string, adjust bool, b *Batch) {
	if !adjust {
		batch.Queue(q)
		return
	}
	batch.Queue(q).QueryRow(func(row pgx.Row) error {
		var adj, zero int64
		if err := row.Scan(&adj, &zero); err != nil {
			return fmt.Errorf("decrement rollups: %w", err)
		}
		b.RollupRows += adj
		b.RollupRowsRemoved += zero
		return nil
	})
}

// Dropped tells whether month's partition of facts.facts is gone (archived
// and dropped): only then are its facts in no table, and an erasure
// subtracts the subject's archived facts from the rollups itself.
func (p *PG) Dropped(ctx context.Context, month time.Time) (bool, error) {
	var exists bool
	name := fmt.Sprintf("facts.facts_y%04dm%02d", month.Year(), int(month.Month()))
	if err := p.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
		return false, unavailable("find partition", err)
	}
	return !exists, nil
}

// DecrementArchived subtracts archived facts (lines of a facts.facts
// archive, as the archiver wrote them) from every rollup in one
// transaction, as EraseEvents does for the facts it deletes: the rollups
// of a month archived and dropped then count only the events its archive
// still holds.
func (p *PG) DecrementArchived(ctx context.Context, facts [][]byte) (Batch, error) {
	var b Batch
	if len(facts) == 0 {
		return b, nil
	}
	lines := texts(facts)
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, eraseSettings+erasedFacts); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO erased_facts
			SELECT (r->>'occurred_at')::timestamptz, r->>'app_id', r->>'country', (r->>'device_model_id')::integer, r->>'os',
			       ARRAY(SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(r->'threats') = 'array' THEN r->'threats' ELSE '[]' END))
			  FROM unnest($1::text[]) AS l(line), LATERAL (SELECT l.line::jsonb AS r) j`, lines)
		if err != nil {
			return fmt.Errorf("read archived facts: %w", err)
		}
		b.Facts = tag.RowsAffected()
		return decrement(ctx, tx, &b)
	})
	if err != nil {
		return Batch{}, unavailable("adjust rollups for archived facts", err)
	}
	return b, nil
}

// subjectColumn is the column of events.events and events.late_events
// that names s: device_id, or user_pseudonym for a user's pseudonym. A
// subject naming neither is refused (it would match every event without
// a user).
func subjectColumn(s Subject) (string, error) {
	switch {
	case s.DeviceID != "":
		return "device_id", nil
	case s.User != "":
		return "user_pseudonym", nil
	}
	return "", fmt.Errorf("subject of app %q names neither a device nor a user: %w", s.AppID, ErrInvalid)
}

// EraseLate deletes at most n of the subject's held late events (they
// have no facts and are in no rollup).
func (p *PG) EraseLate(ctx context.Context, s Subject, n int) (int64, error) {
	col, err := subjectColumn(s)
	if err != nil {
		return 0, err
	}
	// sql: col is subjectColumn's constant (device_id or user_pseudonym); every value is an argument.
	tag, err := p.pool.Exec(ctx, `DELETE FROM events.late_events WHERE ctid IN (
		SELECT ctid FROM events.late_events WHERE app_id = $1 AND `+col+` = $2 LIMIT $3)`, s.AppID, s.key(), n)
	if err != nil {
		return 0, unavailable("erase late events", err)
	}
	return tag.RowsAffected(), nil
}

// EraseDeviceDays deletes the subject's rows of facts.inv_device_days (the
// device id by day, threat, country and cell): the distinct device counts
// of the investigation API then leave it out. A user subject has none: the
// rows name devices, not users, and stay (docs/privacy.md).
func (p *PG) EraseDeviceDays(ctx context.Context, s Subject) (int64, error) {
	if s.DeviceID == "" {
		return 0, nil
	}
	tag, err := p.pool.Exec(ctx, `DELETE FROM facts.inv_device_days WHERE app_id = $1 AND device_id = $2`, s.AppID, s.DeviceID)
	if err != nil {
		return 0, unavailable("erase device days", err)
	}
	return tag.RowsAffected(), nil
}

// EraseDailyUsers deletes a user subject's rows of facts.inv_daily_users
// (the pseudonym per app and day; index inv_daily_users_by_user): the
// investigation API's unique users then leave it out. A device subject
// has none.
func (p *PG) EraseDailyUsers(ctx context.Context, s Subject) (int64, error) {
	if s.DeviceID != "" || s.User == "" {
		return 0, nil
	}
	tag, err := p.pool.Exec(ctx, `DELETE FROM facts.inv_daily_users WHERE app_id = $1 AND user_pseudonym = $2`, s.AppID, s.User)
	if err != nil {
		return 0, unavailable("erase daily users", err)
	}
	return tag.RowsAffected(), nil
}

// ArchivedMonths lists the months of events.events with a verified archive.
func (p *PG) ArchivedMonths(ctx context.Context) ([]string, error) {
	rows, err := p.pool.Query(ctx, `SELECT to_char(month AT TIME ZONE 'UTC', 'YYYY-MM') FROM events.archives
		WHERE table_name = 'events.events' ORDER BY month`)
	if err != nil {
		return nil, unavailable("archived months", err)
	}
	months, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, unavailable("archived months", err)
	}
	if months == nil {
		months = []string{}
	}
	return months, nil
}

// Verify counts what is left of the subject in the events DB.
func (p *PG) Verify(ctx context.Context, s Subject) (v Verification, err error) {
	col, err := subjectColumn(s)
	if err != nil {
		return v, err
	}
	// A device subject has no user rows to count, a user subject no device
	// rows (its blank other column must match nothing).
	// sql: col is subjectColumn's constant (device_id or user_pseudonym); every value is an argument.
	err = p.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM events.events WHERE app_id = $1 AND `+col+` = $2),
		(SELECT count(*) FROM events.late_events WHERE app_id = $1 AND `+col+` = $2),
		(SELECT count(*) FROM facts.inv_device_days WHERE $3::text <> '' AND app_id = $1 AND device_id = $3),
		(SELECT count(*) FROM facts.inv_daily_users WHERE $4::text <> '' AND app_id = $1 AND user_pseudonym = $4)`,
		s.AppID, s.key(), s.DeviceID, s.User).Scan(&v.Events, &v.LateEvents, &v.DeviceDays, &v.DailyUsers)
	if err != nil {
		return v, unavailable("verify", err)
	}
	return v, nil
}
