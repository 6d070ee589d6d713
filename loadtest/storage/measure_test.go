package storage

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"threatview/migrations"
	"threatview/platform/testenv"
)

func TestMeasurePostgres(t *testing.T) {
	url := testenv.MustPostgres(t)
	ctx := context.Background()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	before, n0, err := MeasurePostgres(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if n0 != 0 || len(before) != len(PostgresTables) {
		t.Fatalf("empty DB: %d events, %d tables measured, want 0 and %d", n0, len(before), len(PostgresTables))
	}
	_, err = conn.Exec(ctx, `INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country, payload)
		SELECT gen_random_uuid(), now(), now(), 'app.startup', 'demo-app', 'GB', jsonb_build_object('pad', repeat('x', 300))
		  FROM generate_series(1, 2000)`)
	if err != nil {
		t.Fatal(err)
	}
	after, n1, err := MeasurePostgres(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if n1 != 2000 {
		t.Fatalf("events = %d, want 2000", n1)
	}
	p := Project(Snapshot{Events: n0, Tables: before}, Snapshot{Events: n1, Tables: after}, 105)
	ev := p.Rows[0]
	// Each row carries ~300 bytes of payload plus its key and index entry; a
	// partitioned table's size must come from its partitions (the parent is empty).
	if ev.Table.Name != "events.events" || ev.BytesPerEvent < 300 || ev.BytesPerEvent > 2000 {
		t.Errorf("events.events: %.0f bytes/event, want between 300 and 2000", ev.BytesPerEvent)
	}
}

func TestMeasureMariaDB(t *testing.T) {
	dsn := testenv.MustMariaDB(t)
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db, migrations.Audit); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO audit_events (id, time, actor_app_id, action, outcome, body) VALUES (UNHEX(REPLACE(UUID(), '-', '')), NOW(6), 'demo-app', 'events.ingest', 202, REPEAT('y', 400))`); err != nil {
			t.Fatal(err)
		}
	}
	tables, rows, err := MeasureMariaDB(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 300 {
		t.Errorf("audit rows = %d, want 300", rows)
	}
	var audit *Table
	for i := range tables {
		if tables[i].Name[len(tables[i].Name)-len("audit_events"):] == "audit_events" {
			audit = &tables[i]
		}
	}
	if audit == nil || audit.Bytes < 300*400 {
		t.Errorf("audit_events = %+v, want at least the 120 kB of bodies", audit)
	}
}
