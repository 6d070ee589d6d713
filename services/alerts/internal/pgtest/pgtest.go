// Package pgtest holds the alerts service's integration-test helpers: a
// migrated events DB per test and outbox rows written as the processor
// writes them.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations

	"threatview/alerts"
	"threatview/alerts/postgres"
	"threatview/migrations"
	"threatview/platform/testenv"
)

// MustStore creates a fresh migrated events DB and returns its URL, a
// Store and a pool on it (closed at cleanup).
func MustStore(tb testing.TB) (string, *postgres.Store, *pgxpool.Pool) {
	tb.Helper()
	url := testenv.MustPostgres(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open("pgx", url)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		tb.Fatalf("migrate events DB: %v", err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	st, err := postgres.Open(ctx, url, 8)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	return url, st, pool
}

// ID returns the n-th test event id of a run (a UUID).
func ID(run, n int) string { return fmt.Sprintf("0193a1b2-%04x-7e5f-8a9b-%012x", run, n) }

// Insert writes n outbox rows (ids ID(run, first..first+n-1)) for app with
// threats, received at at, in one transaction (OS Android, no country).
func Insert(tb testing.TB, pool *pgxpool.Pool, run, first, n int, app string, at time.Time, threats ...string) {
	tb.Helper()
	InsertFrom(tb, pool, run, first, n, app, "", "Android", at, threats...)
}

// InsertFrom is Insert with the events' country and OS.
func InsertFrom(tb testing.TB, pool *pgxpool.Pool, run, first, n int, app, country, os string, at time.Time, threats ...string) {
	tb.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, os, country, threats)
		SELECT format('0193a1b2-%s-7e5f-8a9b-%s', lpad(to_hex($1::int), 4, '0'), lpad(to_hex(i), 12, '0'))::uuid,
			$2, $3, $3, 'app.startup', $7, $8, $4
		FROM generate_series($5::int, $5::int + $6::int - 1) i`, run, app, at, threats, first, n, os, country)
	if err != nil {
		tb.Fatalf("insert outbox rows: %v", err)
	}
}

// ShardPool returns a pool on the events DB at url (closed at cleanup)
// whose sessions write alerts.outbox rows as events shard k, as that
// shard's processor does (threatview.shard, migration 000023).
func ShardPool(tb testing.TB, url string, k int) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["threatview.shard"] = strconv.Itoa(k)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Forwarder stores a live HTTP forwarder of every app and threat (nothing
// is sent: the tests read its cursor or give it a sink of their own).
func Forwarder(tb testing.TB, st *postgres.Store) alerts.Forwarder {
	tb.Helper()
	f := alerts.Forwarder{ID: uuid.NewString(), Name: "siem", Type: alerts.ForwardHTTP, URL: "https://siem.example/x",
		Format: alerts.FormatOCSF, CreatedBy: "test"}
	if err := f.Validate(); err != nil {
		tb.Fatal(err)
	}
	if err := st.CreateForwarder(context.Background(), &f, nil); err != nil {
		tb.Fatal(err)
	}
	return f
}
