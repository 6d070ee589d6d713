// Package retentiontest sets up real events and audit databases with
// monthly partitions and rows for the retention tests.
package retentiontest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
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
