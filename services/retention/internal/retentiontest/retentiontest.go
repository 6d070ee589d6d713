// Package retentiontest sets up real events and audit databases with
// monthly partitions and rows for the retention tests.
package retentiontest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"threatview/migrations"
	"threatview/platform/testenv"
	"threatview/retention"
	"threatview/retention/postgres"
)

// Month returns the start of the month i months from the current one.
func Month(i int) time.Time { return retention.MonthStart(time.Now()).AddDate(0, i, 0) }

// Postgres returns the URL and a handle of a fresh, migrated events DB with
// partitions from three months back to three ahead.
func Postgres(tb testing.TB) (string, *sql.DB) {
	tb.Helper()
	ctx := context.Background()
	url := testenv.MustPostgres(tb)
	db, err := sql.Open("pgx", url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		tb.Fatal(err)
	}
	for _, table := range []string{"events.events", "facts.facts"} {
		if _, err := db.ExecContext(ctx, "SELECT events.ensure_monthly_partitions($1::regclass, $2, 3)", table, Month(-3)); err != nil {
			tb.Fatal(err)
		}
	}
	return url, db
}

// FillPostgres inserts n events and n facts received in month (spread
// over its first 27 days).
func FillPostgres(tb testing.TB, db *sql.DB, month time.Time, n int) {
	tb.Helper()
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `
		INSERT INTO events.events (id, received_at, occurred_at, type, app_id, app_version, device_id, device_model,
		       manufacturer, os, os_version, country, client_ip, token_id, request_id, payload)
		SELECT gen_random_uuid(), $1::timestamptz + g * (interval '27 days 3.123456 seconds' / $2), $1::timestamptz,
		       'app.startup', 'app-' || (g % 3), '1.2.' || g, 'dev-' || g, 'Pixel "8"', 'Google', 'android', '14',
		       'US', ('10.0.' || (g % 250) || '.1')::inet, 'tok', 'req-' || g,
		       CASE WHEN g % 5 = 0 THEN NULL ELSE jsonb_build_object('threats', jsonb_build_array('root', 'hook\n"x"'), 'n', g, 'u', 'żółw ✓') END
		  FROM generate_series(1, $2) g`, month, n)
	if err != nil {
		tb.Fatalf("fill events %s: %v", retention.MonthString(month), err)
	}
	_, err = db.ExecContext(ctx, `
		INSERT INTO facts.facts (event_id, received_at, occurred_at, app_id, country, device_model_id, os, threats)
		SELECT gen_random_uuid(), $1::timestamptz + g * (interval '27 days' / $2), $1::timestamptz, 'app', 'DE', g % 4, 'ios',
		       CASE WHEN g % 2 = 0 THEN '{root}'::text[] ELSE '{}'::text[] END
		  FROM generate_series(1, $2) g`, month, n)
	if err != nil {
		tb.Fatalf("fill facts %s: %v", retention.MonthString(month), err)
	}
}

// MariaDB returns the DSN and a handle of a fresh, migrated audit DB with
// partitions from three months back to one ahead (beside pmax).
func MariaDB(tb testing.TB) (string, *sql.DB) {
	tb.Helper()
	ctx := context.Background()
	dsn := testenv.MustMariaDB(tb)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(ctx, db, migrations.Audit); err != nil {
		tb.Fatal(err)
	}
	if _, err := migrations.EnsureAuditPartitions(ctx, db, Month(-3), 4); err != nil {
		tb.Fatal(err)
	}
	return dsn, db
}

// FillMariaDB inserts n audit rows in month, with binary, NULL and
// escape-worthy values.
func FillMariaDB(tb testing.TB, db *sql.DB, month time.Time, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		id := make([]byte, 16)
		rand.Read(id)
		body := make([]byte, 40)
		rand.Read(body)
		var ip, sum any
		if i%4 != 0 {
			ip = []byte{10, 0, byte(i), 1}
			s := make([]byte, 32)
			rand.Read(s)
			sum = s
		}
		at := month.Add(time.Duration(i)*(27*24*time.Hour/time.Duration(n)) + 123456*time.Microsecond)
		_, err := db.ExecContext(ctx, `INSERT INTO audit_events (id, time, actor_token_id, actor_app_id, action, resource,
			outcome, client_ip, user_agent, request_id, event_count, body_sha256, body)
			VALUES (?, ?, ?, ?, 'events.post', ?, 202, ?, ?, ?, ?, ?, ?)`,
			id, at, "tok", fmt.Sprintf("app-%d", i%3), "/v1/events", ip,
			"agent \"quoted\"\n\ttab \\ żółw ✓", fmt.Sprintf("req-%d", i), i, sum, body)
		if err != nil {
			tb.Fatalf("fill audit %s: %v", retention.MonthString(month), err)
		}
	}
}

// Names lists the partitions of table in the order src returns them.
func Names(tb testing.TB, src retention.Source, table string) []string {
	tb.Helper()
	parts, err := src.Partitions(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, p := range parts {
		if p.Table == table {
			out = append(out, p.Name)
		}
	}
	return out
}

// Find returns table's partition for month.
func Find(tb testing.TB, src retention.Source, table string, month time.Time) retention.Partition {
	tb.Helper()
	parts, err := src.Partitions(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range parts {
		if p.Table == table && p.Month.Equal(month) {
			return p
		}
	}
	tb.Fatalf("no partition of %s for %s", table, retention.MonthString(month))
	return retention.Partition{}
}

// EventsSource opens the events DB at url as a retention source, closed
// when the test ends.
func EventsSource(tb testing.TB, url string) *postgres.Source {
	tb.Helper()
	src, err := postgres.Open(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(src.Close)
	return src
}

// RewriteWithout checks Archiver.RewriteWithout against a real events DB and
// st: a month with two devices of one app is archived and one device
// erased; the new version lacks exactly its rows and holds every other row
// (its content hash equals the partition's), the old version is gone, the
// record names v2/, a second rewrite finds nothing, cleanup accepts the
// archive and drops the month, and a restore brings back the other device.
func RewriteWithout(t *testing.T, st retention.Store) {
	t.Helper()
	ctx := context.Background()
	url, db := Postgres(t)
	month := Month(-2)
	FillPostgres(t, db, month, 40)
	// Two devices of one app, three events each, in the archived month.
	for _, dev := range []string{"erased-dev", "kept-dev"} {
		if _, err := db.ExecContext(ctx, `
			INSERT INTO events.events (id, received_at, occurred_at, type, app_id, app_version, device_id, device_model,
			       manufacturer, os, os_version, country, client_ip, token_id, request_id, payload)
			SELECT gen_random_uuid(), received_at + interval '1 second', occurred_at, type, 'app-priv', app_version, $1,
			       device_model, manufacturer, os, os_version, country, client_ip, token_id, request_id, payload
			  FROM events.events WHERE received_at >= $2 AND received_at < $3 ORDER BY received_at LIMIT 3`,
			dev, month, month.AddDate(0, 1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	src := EventsSource(t, url)
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 7, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := src.Record(ctx, "events.events", month)
	if err != nil {
		t.Fatal(err)
	}
	prefix := retention.Prefix("events.events", month)

	// The erasure deletes the subject's rows from the database, then
	// rewrites the archive.
	if _, err := db.ExecContext(ctx, `DELETE FROM events.events WHERE app_id = 'app-priv' AND device_id = 'erased-dev'`); err != nil {
		t.Fatal(err)
	}
	p := Find(t, src, "events.events", month)
	wantRows, wantSum, err := retention.ContentHash(ctx, src, p)
	if err != nil {
		t.Fatal(err)
	}
	drop := subject("app-priv", "erased-dev")
	rw, changed, err := a.RewriteWithout(ctx, "events.events", month, drop)
	if err != nil || !changed {
		t.Fatalf("RewriteWithout = %v, %v", changed, err)
	}
	if rw.RowsRemoved != 3 || rw.Rows != wantRows || rw.Rows != before.Rows-3 || rw.ContentSHA256 != wantSum {
		t.Errorf("rewrite = %+v; want 3 removed, %d rows %s", rw, wantRows, wantSum)
	}
	after, err := src.Record(ctx, "events.events", month)
	if err != nil {
		t.Fatal(err)
	}
	if after.Rows != wantRows || after.ContentSHA256 != wantSum || after.ManifestSHA256 == before.ManifestSHA256 ||
		after.Location == before.Location || !after.VerifiedAt.After(before.VerifiedAt) {
		t.Errorf("record after rewrite = %+v, before %+v", after, before)
	}
	if !strings.HasSuffix(strings.TrimSuffix(after.Location, "/"), "/v2") {
		t.Errorf("new version at %s, want .../v2", after.Location)
	}
	// The old version (directly under the month) is gone, every object of it.
	keys, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix+"v2/") {
			t.Errorf("object %s of the old version left", k)
		}
	}
	// A second rewrite finds nothing to drop and writes nothing.
	if _, changed, err := a.RewriteWithout(ctx, "events.events", month, drop); err != nil || changed {
		t.Errorf("second RewriteWithout = %v, %v; want nothing to do", changed, err)
	}

	// Cleanup accepts the rewritten archive and drops the month; a restore
	// from it brings back the other device and no row of the subject.
	cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := cl.Run(ctx); err != nil {
		t.Fatalf("cleanup refused the rewritten archive: %v", err)
	}
	if _, err := a.Restore(ctx, "events.events", month); err != nil {
		t.Fatal(err)
	}
	n, sum, err := retention.ContentHash(ctx, src, Find(t, src, "events.events", month))
	if err != nil || n != wantRows || sum != wantSum {
		t.Errorf("restored %d rows %s (%v), want %d rows %s", n, sum, err, wantRows, wantSum)
	}
	for dev, want := range map[string]int{"erased-dev": 0, "kept-dev": 3} {
		if got := count(t, db, `SELECT count(*) FROM events.events WHERE app_id = 'app-priv' AND device_id = $1`, dev); got != want {
			t.Errorf("%s has %d rows after restore, want %d", dev, got, want)
		}
	}
}

func subject(app, device string) func(line []byte) (bool, error) {
	return func(line []byte) (bool, error) {
		var row struct {
			AppID    string `json:"app_id"`
			DeviceID string `json:"device_id"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return false, errors.New("archive row is not JSON")
		}
		return row.AppID == app && row.DeviceID == device, nil
	}
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	// sql: q is a literal of this package's checks; values travel as $n args.
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
