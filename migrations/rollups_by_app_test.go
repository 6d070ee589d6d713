package migrations

import (
	"context"
	"database/sql"
	"io/fs"
	"testing"

	"github.com/pressly/goose/v3"

	"threatview/platform/testenv"
)

// TestRollupsByApp_ExistingRows applies 000003 to a database that already
// holds rollups, facts and pending work in the old shape, as a database
// migrated before the file existed does (out of order, after 000050).
func TestRollupsByApp_ExistingRows(t *testing.T) {
	db, err := sql.Open("pgx", testenv.MustPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	fsys, err := fs.Sub(files, string(Events))
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{1, 50} {
		if _, err := p.ApplyVersion(ctx, v, true); err != nil {
			t.Fatalf("apply %d: %v", v, err)
		}
	}
	// Hour H holds three events with facts (two folded, one still queued)
	// and, in the old rollup, five more whose facts were dropped; hour H2
	// only counts events whose facts are gone.
	mustExec(t, db, `
INSERT INTO facts.device_models_dim (id, manufacturer, model) VALUES (1, 'Acme', 'R1');
INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country, device_model, manufacturer, os, payload) VALUES
 ('00000000-0000-4000-8000-000000000001', now(), date_trunc('hour', now()) + interval '1 minute', 't', 'a', 'DE', 'R1', 'Acme', 'iOS', '{"threats":["root","root"]}'),
 ('00000000-0000-4000-8000-000000000002', now(), date_trunc('hour', now()) + interval '2 minute', 't', 'b', 'DE', 'R1', 'Acme', 'iOS', '{"threats":[{"type":"hooking"},"root",{"x":1},7]}'),
 ('00000000-0000-4000-8000-000000000003', now(), date_trunc('hour', now()) + interval '3 minute', 't', 'a', 'DE', 'R1', 'Acme', 'iOS', NULL);
INSERT INTO facts.facts (event_id, received_at, occurred_at, app_id, country, device_model_id, os)
 SELECT id, received_at, occurred_at, app_id, country, 1, os FROM events.events;
INSERT INTO facts.facts_to_process (occurred_at, country, device_model_id, os)
 SELECT occurred_at, country, 1, os FROM events.events WHERE id = '00000000-0000-4000-8000-000000000003';
INSERT INTO facts.events_by_country_per_hour (bucket, country, count) VALUES
 (date_trunc('hour', now()), 'DE', 7), (date_trunc('hour', now()) - interval '1 day', 'FR', 4);`)
	if _, err := Up(ctx, db, Events); err != nil {
		t.Fatalf("Up after 000050: %v", err)
	}
	got := map[string]int{}
	rows, err := db.QueryContext(ctx, `
SELECT 'country:' || app_id || ':' || (bucket = date_trunc('hour', now())) || ':' || country, count FROM facts.events_by_country_per_hour
UNION ALL SELECT 'os-day:' || app_id || ':' || os, count FROM facts.events_by_os_per_day
UNION ALL SELECT 'threat:' || app_id || ':' || threat, count FROM facts.events_by_threat_per_hour
UNION ALL SELECT 'all-country:' || (bucket = date_trunc('hour', now())) || ':' || country, count FROM facts.all_apps_events_by_country_per_hour
UNION ALL SELECT 'all-threat-month:' || threat, count FROM facts.all_apps_events_by_threat_per_month
UNION ALL SELECT 'facts-threats:' || array_to_string(threats, ','), count(*) FROM facts.facts GROUP BY threats`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got[k] = n
	}
	want := map[string]int{
		"country:a:true:DE": 2, "country:b:true:DE": 1, "country::true:DE": 5, "country::false:FR": 4,
		"os-day:a:iOS": 2, "os-day:b:iOS": 1,
		"threat:a:root": 1, "threat:b:root": 1, "threat:b:hooking": 1,
		"all-country:true:DE": 8, "all-country:false:FR": 4,
		"all-threat-month:root": 2, "all-threat-month:hooking": 1,
		"facts-threats:": 1, "facts-threats:root": 1, "facts-threats:hooking,root": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("after migrating, %s = %d, want %d", k, got[k], n)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("after migrating, unexpected row %s = %d", k, got[k])
		}
	}

	// Down keeps the counts over all apps; up again splits what facts show.
	// 000003 reshapes the queue, which 000019 dropped: down 000019 first
	// restores it.
	if _, err := p.ApplyVersion(ctx, 19, false); err != nil {
		t.Fatalf("down 000019: %v", err)
	}
	if _, err := p.ApplyVersion(ctx, 3, false); err != nil {
		t.Fatalf("down 000003: %v", err)
	}
	var de, fr int
	if err := db.QueryRowContext(ctx, `SELECT
		(SELECT count FROM facts.events_by_country_per_hour WHERE bucket = date_trunc('hour', now()) AND country = 'DE'),
		(SELECT count FROM facts.events_by_country_per_hour WHERE country = 'FR')`).Scan(&de, &fr); err != nil || de != 8 || fr != 4 {
		t.Fatalf("after down: DE %d, FR %d, %v; want 8 and 4", de, fr, err)
	}
	if _, err := p.ApplyVersion(ctx, 3, true); err != nil {
		t.Fatalf("up 000003 again: %v", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT
		(SELECT sum(count) FROM facts.events_by_country_per_hour WHERE bucket = date_trunc('hour', now()) AND country = 'DE'),
		(SELECT count FROM facts.all_apps_events_by_country_per_hour WHERE bucket = date_trunc('hour', now()) AND country = 'DE')`).Scan(&de, &fr); err != nil || de != 8 || fr != 8 {
		t.Fatalf("after up again: DE %d over apps, %d in the summary, %v; want 8", de, fr, err)
	}
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	// sql: test fixture written here.
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
