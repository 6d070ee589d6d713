package postgres_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

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
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("../../../migrations/events"))
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		t.Fatalf("migrate up: %v", err)
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
	if _, err := pool.Exec(ctx, `INSERT INTO facts.facts_to_process (occurred_at, app_id, country, device_model_id, os, threats)
		VALUES (now(), 'a', 'DE', 1, 'iOS', '{}')`); err == nil {
		t.Fatal("an older processor's insert into the queue was accepted, want it refused")
	}
}
