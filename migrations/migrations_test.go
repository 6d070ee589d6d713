package migrations_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"threatview/migrations"
	"threatview/platform/testenv"
)

func monthsAhead(now time.Time, n int) []time.Time {
	first := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	out := make([]time.Time, 0, n+1)
	for i := 0; i <= n; i++ {
		out = append(out, first.AddDate(0, i, 0))
	}
	return out
}

func TestUp_Events(t *testing.T) {
	db, err := sql.Open("pgx", testenv.MustPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if n, err := migrations.Up(ctx, db, migrations.Events); err != nil || n == 0 {
		t.Fatalf("first Up = %d, %v; want >0 applied", n, err)
	}
	if n, err := migrations.Up(ctx, db, migrations.Events); err != nil || n != 0 {
		t.Fatalf("second Up = %d, %v; want 0 applied, no error", n, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := migrations.MaintainEventPartitions(ctx, db, 3); err != nil {
			t.Fatalf("MaintainEventPartitions run %d: %v", i, err)
		}
	}
	var now time.Time
	if err := db.QueryRow("SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"events", "facts"} {
		for _, m := range monthsAhead(now, 3) {
			name := table + "_" + m.Format("y2006m01")
			schema := map[string]string{"events": "events", "facts": "facts"}[table]
			var lo, hi string
			err := db.QueryRow(`SELECT pg_get_expr(c.relpartbound, c.oid), '' FROM pg_class c
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, name).Scan(&lo, &hi)
			if err != nil {
				t.Errorf("partition %s.%s: %v", schema, name, err)
			}
		}
	}
	// Rows of this month are accepted (the partition exists).
	if _, err := db.Exec(`INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country)
		VALUES ('0193a4c2-7e1f-7c3a-9b2d-5e6f7a8b9c0d', now(), now(), 'app.startup', 'a', 'ZZ')`); err != nil {
		t.Fatalf("insert into this month: %v", err)
	}
	// facts.facts is keyed by time first (000016, issue 38), on every
	// partition: its inserts land on the key's rightmost pages whatever ids
	// the clients send.
	rows, err := db.Query(`SELECT c.conrelid::regclass::text, pg_get_constraintdef(c.oid) FROM pg_constraint c
		JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
		WHERE n.nspname = 'facts' AND c.contype = 'p' AND (r.relname = 'facts' OR r.relname LIKE 'facts\_y%')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	keys := 0
	for rows.Next() {
		var table, def string
		if err := rows.Scan(&table, &def); err != nil {
			t.Fatal(err)
		}
		if keys++; def != "PRIMARY KEY (received_at, app_id, event_id)" {
			t.Errorf("%s: %s, want PRIMARY KEY (received_at, app_id, event_id)", table, def)
		}
	}
	if keys < 4 {
		t.Errorf("%d primary keys of facts.facts and its partitions, want at least 4", keys)
	}
}

func TestUp_Audit(t *testing.T) {
	db, err := sql.Open("mysql", testenv.MustMariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for i, want := range []int{1, 0} {
		n, err := migrations.Up(ctx, db, migrations.Audit)
		if err != nil || (want > 0 && n == 0) || (want == 0 && n != 0) {
			t.Fatalf("Up run %d = %d, %v", i, n, err)
		}
	}
	now := time.Now()
	if n, err := migrations.EnsureAuditPartitions(ctx, db, now, 3); err != nil || n != 4 {
		t.Fatalf("first EnsureAuditPartitions = %d, %v; want 4 created", n, err)
	}
	if n, err := migrations.EnsureAuditPartitions(ctx, db, now, 3); err != nil || n != 0 {
		t.Fatalf("second EnsureAuditPartitions = %d, %v; want 0", n, err)
	}
	rows, err := db.Query(`SELECT PARTITION_NAME FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'audit_events' ORDER BY PARTITION_ORDINAL_POSITION`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	var want []string
	for _, m := range monthsAhead(now, 3) {
		want = append(want, migrations.AuditPartitionName(m))
	}
	want = append(want, "pmax")
	if len(got) != len(want) {
		t.Fatalf("partitions = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("partitions = %v, want %v", got, want)
		}
	}
}

func TestUp_Tokens(t *testing.T) {
	db, err := sql.Open("mysql", testenv.MustMariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 2; i++ {
		if _, err := migrations.Up(context.Background(), db, migrations.Tokens); err != nil {
			t.Fatalf("Up run %d: %v", i, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM tokens").Scan(&n); err != nil {
		t.Fatalf("tokens table: %v", err)
	}
}
