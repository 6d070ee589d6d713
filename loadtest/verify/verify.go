// Package verify checks the stack's promises after a load: every accepted
// event is stored exactly once, every rollup row (per app, and over all
// apps) equals a count(*) over the stored events, and the audit trail holds one row per accepted request.
package verify

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Manifest describes a finished run: written by the run command next to the
// ids file, read by verify.
type Manifest struct {
	IDsFile  string    `json:"ids_file"`
	AppID    string    `json:"app_id"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Requests int       `json:"accepted_requests"`
	Events   int       `json:"accepted_events"`
	Audited  bool      `json:"audited"`
}

// Events is the outcome of the exactly-once check.
type Events struct {
	Accepted   int // ids in the file
	Distinct   int // distinct ids in the file (the collector never repeats one)
	Stored     int // distinct accepted ids found in events.events
	Missing    int // accepted, not stored
	Duplicated int // stored more than once
	FactsOff   int // stored events without exactly one row in facts.facts
	// Countries is how many countries the stored events were placed in; 1
	// (all ZZ) means the collector did not trust X-Forwarded-For.
	Countries int
}

// ReadIDs reads one id per line.
func ReadIDs(r io.Reader) ([]string, error) {
	var ids []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s := strings.TrimSpace(sc.Text())
		if s != "" && !strings.HasPrefix(s, "#") {
			ids = append(ids, s)
		}
	}
	return ids, sc.Err()
}

// ReadIDsFile reads ids from a file.
func ReadIDsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadIDs(f)
}

// loadIDs copies ids into a temporary table accepted(id uuid).
func loadIDs(ctx context.Context, conn *pgx.Conn, ids []string) error {
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS accepted (id uuid NOT NULL) ON COMMIT PRESERVE ROWS`); err != nil {
		return fmt.Errorf("create temp table: %w", err)
	}
	if _, err := conn.Exec(ctx, `TRUNCATE accepted`); err != nil {
		return err
	}
	rows := make([][]any, len(ids))
	for i, id := range ids {
		rows[i] = []any{id}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"accepted"}, []string{"id"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy %d ids: %w", len(ids), err)
	}
	_, err := conn.Exec(ctx, `CREATE INDEX IF NOT EXISTS accepted_id ON accepted (id); ANALYZE accepted`)
	return err
}

// CheckEvents looks every id up in events.events and facts.facts. It waits
// up to wait for the processor to store the last of them.
func CheckEvents(ctx context.Context, conn *pgx.Conn, ids []string, wait time.Duration, logf func(string, ...any)) (Events, error) {
	var e Events
	if err := loadIDs(ctx, conn, ids); err != nil {
		return e, err
	}
	e.Accepted = len(ids)
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT id) FROM accepted`).Scan(&e.Distinct); err != nil {
		return e, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := conn.QueryRow(ctx, `
			WITH a AS (SELECT DISTINCT id FROM accepted),
			     c AS (SELECT a.id, (SELECT count(*) FROM events.events e WHERE e.id = a.id) AS n FROM a)
			SELECT count(*) FILTER (WHERE n >= 1), count(*) FILTER (WHERE n = 0), count(*) FILTER (WHERE n > 1) FROM c`).
			Scan(&e.Stored, &e.Missing, &e.Duplicated)
		if err != nil {
			return e, fmt.Errorf("look up accepted ids: %w", err)
		}
		if e.Missing == 0 || time.Now().After(deadline) {
			break
		}
		if logf != nil {
			logf("verify: %d of %d accepted events not stored yet; waiting", e.Missing, e.Distinct)
		}
		select {
		case <-ctx.Done():
			return e, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	err := conn.QueryRow(ctx, `
		WITH a AS (SELECT DISTINCT id FROM accepted),
		     c AS (SELECT (SELECT count(*) FROM facts.facts f
		                   WHERE f.received_at = e.received_at AND f.app_id = e.app_id AND f.event_id = e.id) AS n
		            FROM a JOIN events.events e ON e.id = a.id)
		SELECT count(*) FILTER (WHERE n <> 1) FROM c`).Scan(&e.FactsOff)
	if err != nil {
		return e, fmt.Errorf("look up facts: %w", err)
	}
	err = conn.QueryRow(ctx, `SELECT count(DISTINCT e.country) FROM events.events e WHERE e.id IN (SELECT id FROM accepted)`).Scan(&e.Countries)
	if err != nil {
		return e, fmt.Errorf("count countries: %w", err)
	}
	return e, nil
}

// Rollup is the outcome of comparing one rollup table to count(*).
type Rollup struct {
	Table      string
	Rows       int // buckets in the rollup
	Truth      int // buckets in count(*) over facts
	Mismatched int // buckets whose counts differ or exist on one side only
}

type rollupDef struct {
	table string
	key   string // the rollup's key column
	truth string // the same key computed from events.events e (and the dimension d)
	join  string // extra join for the key
	trunc string // bucket expression over e.occurred_at
	app   string // the app column of the rollup ("''" for a summary over all apps)
	appOf string // the app of an event ("''" for a summary over all apps)
}

// threatJoin lists, for an event e, each distinct threat type it reports
// (a string, or an object's "type" string; cut to 128 characters), written
// with jsonpath, apart from the database function the processor uses.
const threatJoin = `CROSS JOIN LATERAL (
	SELECT DISTINCT substr(v #>> '{}', 1, 128) AS k FROM (
		SELECT jsonb_path_query(coalesce(e.payload, '{}'), 'lax $.threats[*] ? (@.type() == "string")') AS v
		UNION ALL
		SELECT jsonb_path_query(coalesce(e.payload, '{}'), 'lax $.threats[*] ? (@.type() == "object").type ? (@.type() == "string")')
	) s WHERE v #>> '{}' <> '') th`

// The bucket expressions assume the session time zone is UTC (set by
// CheckRollups): hourly buckets are timestamptz, daily and monthly are dates.
// Every rollup is checked per app, and its summary over all apps
// (facts.all_apps_*) over all apps.
var rollups = func() []rollupDef {
	var out []rollupDef
	for _, dim := range []struct{ name, key, truth, join string }{
		{"country", "country", "e.country", ""},
		{"device_model", "device_model_id", "d.id", "JOIN facts.device_models_dim d ON d.manufacturer = e.manufacturer AND d.model = e.device_model"},
		{"os", "os", "e.os", ""},
		{"threat", "threat", "th.k", threatJoin},
	} {
		for _, b := range []struct{ name, trunc string }{
			{"hour", "date_trunc('hour', e.occurred_at)"},
			{"day", "date_trunc('day', e.occurred_at)::date"},
			{"month", "date_trunc('month', e.occurred_at)::date"},
		} {
			t := "events_by_" + dim.name + "_per_" + b.name
			out = append(out,
				rollupDef{"facts." + t, dim.key, dim.truth, dim.join, b.trunc, "app_id", "e.app_id"},
				rollupDef{"facts.all_apps_" + t, dim.key, dim.truth, dim.join, b.trunc, "''", "''"})
		}
	}
	return out
}()

// CheckRollups compares every rollup row (a key's rows summed: the
// summaries over all apps have one row per shard, migration events 000024)
// with a count(*) over events.events for the same app, bucket and key (the device model through the dimension
// table, threat types from the payload), every summary over all apps with
// the count over all apps, and checks that facts.facts and events.events hold the same
// number of rows.
func CheckRollups(ctx context.Context, conn *pgx.Conn) ([]Rollup, int64, error) {
	if _, err := conn.Exec(ctx, `SET TIME ZONE 'UTC'`); err != nil {
		return nil, 0, err
	}
	var out []Rollup
	for _, d := range rollups {
		r := Rollup{Table: d.table}
		// Table and column names come from the fixed list above.
		q := fmt.Sprintf(`
			WITH truth AS (SELECT %[7]s AS a, %[2]s AS bucket, %[3]s AS k, count(*) AS n FROM events.events e %[4]s GROUP BY 1, 2, 3),
			     r AS (SELECT %[6]s AS a, bucket, %[5]s AS k, sum(count) AS count FROM %[1]s GROUP BY 1, 2, 3 HAVING sum(count) <> 0)
			SELECT (SELECT count(*) FROM r),
			       (SELECT count(*) FROM truth),
			       (SELECT count(*) FROM truth t FULL JOIN r ON r.a = t.a AND r.bucket = t.bucket AND r.k = t.k
			         WHERE t.n IS DISTINCT FROM r.count)`, d.table, d.trunc, d.truth, d.join, d.key, d.app, d.appOf)
		// sql: table and column names from the fixed rollup list above; no input.
		if err := conn.QueryRow(ctx, q).Scan(&r.Rows, &r.Truth, &r.Mismatched); err != nil {
			return nil, 0, fmt.Errorf("compare %s: %w", d.table, err)
		}
		out = append(out, r)
	}
	var diff int64
	err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM events.events) - (SELECT count(*) FROM facts.facts)`).Scan(&diff)
	if err != nil {
		return nil, 0, fmt.Errorf("compare events and facts: %w", err)
	}
	return out, diff, nil
}

// Audit is the outcome of the audit check.
type Audit struct {
	Expected int // accepted requests of the run
	Rows     int // requests of the app audited with outcome 202 (not retracted) in the run's window
}

// CheckAudit counts the audit rows the run produced: rows of the run's app
// with outcome 202 whose time lies in the run's window, waiting up to wait
// for the audit worker. The window starts at the run's start: the load
// targets 127.0.0.1 only, so the collector stamps each request on receipt
// with the generator's own clock, after the run began; rows just before it
// are another run's (a sweep starts as soon as its warm-up ends). It ends
// 15 s after the run, for requests still queued when the run's clock stopped.
func CheckAudit(ctx context.Context, db *sql.DB, m Manifest, wait time.Duration, logf func(string, ...any)) (Audit, error) {
	a := Audit{Expected: m.Requests}
	from := m.Start.UTC()
	to := m.End.Add(15 * time.Second).UTC()
	deadline := time.Now().Add(wait)
	last := -1
	for {
		// A 202 record followed by a 503 one for the same request id was
		// retracted by the collector (the events' publish failed after the
		// audit record was durable): that request was not accepted. One
		// range scan of the app's index, grouped by request.
		err := db.QueryRowContext(ctx, `
			SELECT count(*) FROM (
			  SELECT request_id, MAX(outcome = 202) AS accepted, MAX(outcome = 503) AS retracted
			    FROM audit_events
			   WHERE actor_app_id = ? AND action = 'events.collect' AND time >= ? AND time < ?
			   GROUP BY request_id) r
			 WHERE r.accepted AND NOT r.retracted`,
			m.AppID, from, to).Scan(&a.Rows)
		if err != nil {
			return a, fmt.Errorf("count audit rows: %w", err)
		}
		if a.Rows >= a.Expected || time.Now().After(deadline) {
			return a, nil
		}
		if a.Rows != last && logf != nil {
			logf("verify: %d of %d audit rows stored; waiting", a.Rows, a.Expected)
		}
		last = a.Rows
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
