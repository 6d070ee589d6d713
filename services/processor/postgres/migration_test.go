package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"threatview/migrations"
	"threatview/platform/testenv"
	"threatview/processor/internal/pgtest"
)

// TestMigration000014_FoldsTheQueue upgrades a database an older processor
// left with facts still queued for its aggregator: migration 000014 folds
// them into every rollup before the queue stops being used, so the upgrade
// loses no count and doubles none, and an older processor's insert into the
// queue is refused (it retries until the new one takes over).
func TestMigration000014_FoldsTheQueue(t *testing.T) {
	url := testenv.MustPostgres(t)
	ctx := context.Background()
	db, p := eventsMigrations(t, url)
	if _, err := p.UpTo(ctx, 13); err != nil {
		t.Fatalf("migrate up to 000013: %v", err)
	}
	if _, err := p.ApplyVersion(ctx, 50, true); err != nil { // events.archives
		t.Fatalf("apply 000050: %v", err)
	}
	// 300 events as an older processor stored them: events, the device
	// model, and a queued fact each, nothing folded yet.
	for _, q := range []string{
		`SELECT events.maintain_partitions(1)`,
		`INSERT INTO facts.device_models_dim (manufacturer, model) VALUES ('Acme', 'R1'), ('Globex', 'G2')`,
		`INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country, device_model, manufacturer, os, payload)
		 SELECT gen_random_uuid(), now(), now() - (i % 50) * interval '37 minutes', 'app.startup', 'app-' || (i % 3),
			(ARRAY['DE', 'FR', 'US'])[1 + i % 3], (ARRAY['R1', 'G2'])[1 + i % 2], (ARRAY['Acme', 'Globex'])[1 + i % 2],
			(ARRAY['iOS', 'Android', ''])[1 + i % 3],
			(ARRAY['{"threats":["root","hooking"]}', '{"threats":[{"type":"debugger"}]}', NULL, '{"threats":[]}'])[1 + i % 4]::jsonb
		 FROM generate_series(1, 300) AS i`,
		`INSERT INTO facts.facts_to_process (occurred_at, app_id, country, device_model_id, os, threats)
		 SELECT e.occurred_at, e.app_id, e.country, d.id, e.os, facts.threat_types(e.payload)
		 FROM events.events e JOIN facts.device_models_dim d ON d.manufacturer = e.manufacturer AND d.model = e.device_model`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	// 000019 drops the queue; the fold is checked where 000014 left it.
	if _, err := p.ApplyVersion(ctx, 14, true); err != nil {
		t.Fatalf("apply 000014: %v", err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM facts.facts_to_process"); n != 0 {
		t.Fatalf("queue holds %d rows after the migration, want 0", n)
	}
	pgtest.AssertRollupsExact(t, pool, 300)
	if _, err := pool.Exec(ctx, queueInsert); err == nil {
		t.Fatal("an older processor's insert into the queue was accepted, want it refused")
	}
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	pgtest.AssertRollupsExact(t, pool, 300)
}

// eventsMigrations opens the database at url (closed at cleanup) and the
// events migrations over it, each applied or undone on its own.
func eventsMigrations(t *testing.T, url string) (*sql.DB, *goose.Provider) {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("../../../migrations/events"))
	if err != nil {
		t.Fatal(err)
	}
	return db, p
}

// queueInsert is what a processor older than migration 000014 wrote per
// event besides the event and its fact.
const queueInsert = `INSERT INTO facts.facts_to_process (occurred_at, app_id, country, device_model_id, os, threats)
	VALUES (now(), 'a', 'DE', 1, 'iOS', '{}')`

// TestMigration000019_DropsTheQueue: the aggregator's queue and staging
// table are gone, with the queue's refusal trigger; a processor older than
// 000014 still running fails its batch with an undefined table (SQLSTATE
// 42P01, which it retries as it retried 000014's refusal) and writes
// nothing. Down restores both tables as 000014 left them (empty, inserts
// refused, the services' grants), and Up refuses to drop rows no rollup
// counts.
func TestMigration000019_DropsTheQueue(t *testing.T) {
	url, pool := pgtest.MustEventsDB(t)
	ctx := context.Background()
	gone := func() bool {
		t.Helper()
		return pgtest.Count(t, pool, `SELECT count(*) FROM (VALUES (to_regclass('facts.facts_to_process')::oid), (to_regclass('facts.aggregate_staging')::oid),
			(to_regprocedure('facts.refuse_queue_insert()')::oid)) AS v(o) WHERE o IS NOT NULL`) == 0
	}
	if !gone() {
		t.Fatal("the queue, the staging table or the refusal trigger's function exists after migrating, want all gone")
	}
	var pgErr *pgconn.PgError
	if _, err := pool.Exec(ctx, queueInsert); !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("an older processor's insert into the queue: %v, want SQLSTATE 42P01", err)
	}

	_, p := eventsMigrations(t, url)
	if _, err := p.ApplyVersion(ctx, 19, false); err != nil {
		t.Fatalf("down 000019: %v", err)
	}
	if gone() {
		t.Fatal("down 000019 did not restore the queue, the staging table and the refusal")
	}
	if _, err := pool.Exec(ctx, queueInsert); !errors.As(err, &pgErr) || pgErr.Code != "P0001" {
		t.Fatalf("insert into the restored queue: %v, want refused (SQLSTATE P0001)", err)
	}
	// A role the cluster lacks is not checked (000091 grants to those that exist).
	grants := map[string][]string{"threatview_processor": {"SELECT", "INSERT", "UPDATE"}, "threatview_privacy": {"SELECT", "UPDATE", "DELETE"}, "threatview_ro": {"SELECT"}}
	for role, privs := range grants {
		for _, table := range []string{"facts.facts_to_process", "facts.aggregate_staging"} {
			for _, priv := range privs {
				if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_roles WHERE rolname = $1 AND NOT has_table_privilege(rolname, $2, $3)`, role, table, priv); n != 0 {
					t.Errorf("after down 000019, %s lacks %s on %s", role, priv, table)
				}
			}
		}
	}

	if _, err := pool.Exec(ctx, `INSERT INTO facts.aggregate_staging (occurred_at, app_id, country, device_model_id, os, threats)
		VALUES (now(), 'a', 'DE', 1, 'iOS', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ApplyVersion(ctx, 19, true); err == nil || gone() {
		t.Fatalf("up 000019 over a staged row: %v, want refused with both tables kept", err)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE facts.aggregate_staging`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ApplyVersion(ctx, 19, true); err != nil || !gone() {
		t.Fatalf("up 000019 again: %v, want both tables dropped", err)
	}
}

// TestMigration000022_RefusesCollationNotByteOrder: the processor sorts
// its upserts' keys in Go, byte by byte, and the erasure and the
// investigation triggers lock the same rows in the database's collation
// order, so the events database must sort in byte order. A database of
// another collation (here ICU en-US, where 'a' sorts before 'B') is
// refused by migration 000022 with a hint, and nothing past it is
// applied; the stack's database (C) sorts strings as Go does.
func TestMigration000022_RefusesCollationNotByteOrder(t *testing.T) {
	ctx := context.Background()
	keys := []string{"a", "B", "_x", "Z9", "é", "e", "app-10", "app-9", "app 1", "ÿ", "DE", "de"}
	order := func(db *sql.DB) []string {
		t.Helper()
		var got []string
		rows, err := db.QueryContext(ctx, `SELECT k FROM unnest($1::text[]) AS k ORDER BY k`, keys)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			got = append(got, k)
		}
		return got
	}
	byteOrder := slices.Clone(keys)
	slices.Sort(byteOrder)

	url := testenv.MustPostgresWith(t, "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C' TEMPLATE template0")
	db, p := eventsMigrations(t, url)
	if got := order(db); slices.Equal(got, byteOrder) {
		t.Fatalf("the ICU database sorts %q as Go does: the test misses the case", got)
	}
	if _, err := p.UpTo(ctx, 21); err != nil {
		t.Fatalf("migrate up to 000021: %v", err)
	}
	_, err := p.ApplyVersion(ctx, 22, true)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "not in byte order") || !strings.Contains(pgErr.Hint, "LOCALE 'C'") {
		t.Fatalf("000022 on an ICU en-US database: %v, want refused (SQLSTATE 22023) with a hint to create it with LOCALE 'C'", err)
	}
	if _, err := migrations.Up(ctx, db, migrations.Events); err == nil {
		t.Fatal("migrations.Up on an ICU en-US database succeeded, want refused")
	}
	var applied int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id >= 22 AND is_applied`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != 0 {
		t.Errorf("%d migrations from 000022 on are recorded as applied on the refused database, want 0", applied)
	}

	stack, _ := pgtest.MustEventsDB(t)
	sdb, _ := eventsMigrations(t, stack)
	if got := order(sdb); !slices.Equal(got, byteOrder) {
		t.Errorf("the stack's events database sorts %q, Go sorts %q: the processor's and the erasure's lock orders differ", got, byteOrder)
	}
}
