package verify

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"threatview/migrations"
	"threatview/platform/testenv"
)

func mustEventsDB(t *testing.T) *pgx.Conn {
	t.Helper()
	url := testenv.MustPostgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		t.Fatalf("migrate events DB: %v", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// store writes one event and its fact; fold then makes the rollups.
func store(t *testing.T, conn *pgx.Conn, id string, occurred time.Time, country string, model int, os string) {
	t.Helper()
	now := time.Now().UTC()
	maker, name := "Google", "Pixel 8"
	if model == 2 {
		maker, name = "Apple", "iPhone15,2"
	}
	app, threats := "demo-app", `{"threats":["root",{"type":"hooking"},"root"]}`
	if model == 2 {
		app, threats = "other-app", `{"threats":[{"type":"emulator"}]}`
	}
	exec(t, conn, `INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country, manufacturer, device_model, os, payload)
		VALUES ($1, $2, $3, 'app.startup', $8, $4, $5, $6, $7, $9)`, id, now, occurred, country, maker, name, os, app, threats)
	exec(t, conn, `INSERT INTO facts.facts (event_id, received_at, occurred_at, app_id, country, device_model_id, os, threats)
		VALUES ($1, $2, $3, $7, $4, $5, $6, facts.threat_types($8))`, id, now, occurred, country, model, os, app, threats)
}

// fold recomputes every rollup from facts, as the processor's writes leave
// them.
func fold(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	exec(t, conn, `SET TIME ZONE 'UTC'`)
	for _, d := range rollups {
		exec(t, conn, `DELETE FROM `+d.table)
		bucket := strings.ReplaceAll(d.trunc, "e.", "")
		from, key := "facts.facts", d.key
		if d.key == "threat" {
			from, key = "facts.facts f, unnest(f.threats) AS x(threat)", "x.threat"
		}
		if d.app == "app_id" {
			exec(t, conn, fmt.Sprintf(`INSERT INTO %s (app_id, bucket, %s, count) SELECT app_id, %s, %s, count(*) FROM %s GROUP BY 1, 2, 3`, d.table, d.key, bucket, key, from))
		} else {
			exec(t, conn, fmt.Sprintf(`INSERT INTO %s (bucket, %s, count) SELECT %s, %s, count(*) FROM %s GROUP BY 1, 2`, d.table, d.key, bucket, key, from))
		}
	}
}

func uuidN(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func TestCheckEventsAndRollups(t *testing.T) {
	conn := mustEventsDB(t)
	ctx := context.Background()
	exec(t, conn, `INSERT INTO facts.device_models_dim (id, manufacturer, model) VALUES (1, 'Google', 'Pixel 8'), (2, 'Apple', 'iPhone15,2')`)
	now := time.Now().UTC().Truncate(time.Second)
	var ids []string
	for i := 0; i < 20; i++ {
		id := uuidN(i)
		ids = append(ids, id)
		occ := now.Add(-time.Duration(i) * 20 * time.Minute) // spans several hours, maybe two days
		store(t, conn, id, occ, []string{"GB", "SE", "US"}[i%3], 1+i%2, []string{"android", "ios"}[i%2])
	}
	fold(t, conn)

	t.Run("OK", func(t *testing.T) {
		e, err := CheckEvents(ctx, conn, ids, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e != (Events{Accepted: 20, Distinct: 20, Stored: 20, Countries: 3}) {
			t.Errorf("CheckEvents = %+v, want all 20 stored once", e)
		}
		rs, diff, err := CheckRollups(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 24 || diff != 0 {
			t.Fatalf("CheckRollups = %d tables, diff %d", len(rs), diff)
		}
		for _, r := range rs {
			if r.Mismatched != 0 || r.Rows == 0 || r.Rows != r.Truth {
				t.Errorf("%s: %+v, want equal to count(*)", r.Table, r)
			}
		}
	})

	t.Run("Missing", func(t *testing.T) {
		e, err := CheckEvents(ctx, conn, append([]string{uuidN(999)}, ids...), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Missing != 1 || e.Stored != 20 || e.Duplicated != 0 {
			t.Errorf("CheckEvents = %+v, want 1 missing", e)
		}
	})

	t.Run("RollupOff", func(t *testing.T) {
		exec(t, conn, `UPDATE facts.events_by_country_per_day SET count = count + 1 WHERE country = 'SE'`)
		exec(t, conn, `INSERT INTO facts.events_by_os_per_hour (app_id, bucket, os, count) VALUES ('demo-app', '2001-01-01 00:00:00+00', 'android', 3)`)
		exec(t, conn, `UPDATE facts.events_by_threat_per_month SET app_id = 'other-app' WHERE app_id = 'demo-app' AND threat = 'root'`)
		rs, _, err := CheckRollups(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, r := range rs {
			got[r.Table] = r.Mismatched
		}
		if got["facts.events_by_country_per_day"] == 0 || got["facts.events_by_os_per_hour"] != 1 || got["facts.events_by_os_per_day"] != 0 ||
			got["facts.events_by_threat_per_month"] == 0 || got["facts.all_apps_events_by_threat_per_month"] != 0 {
			t.Errorf("mismatches = %v, want country/day, one os/hour bucket and the threats moved to another app", got)
		}
		fold(t, conn)
	})

	t.Run("Duplicated", func(t *testing.T) {
		// The same id again with another receive time: the unique key allows it,
		// exactly-once forbids it.
		exec(t, conn, `INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country, manufacturer, device_model, os)
			VALUES ($1, now() - interval '1 second', now(), 'app.startup', 'demo-app', 'GB', 'Google', 'Pixel 8', 'android')`, ids[3])
		e, err := CheckEvents(ctx, conn, ids, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.Duplicated != 1 || e.Missing != 0 {
			t.Errorf("CheckEvents = %+v, want 1 duplicated", e)
		}
		rs, diff, err := CheckRollups(ctx, conn)
		if err != nil || diff != 1 {
			t.Errorf("events minus facts = %d, %v; want 1", diff, err)
		}
		// The duplicate is counted by count(*) over events but not in the
		// rollups: every dimension's hour bucket shows it.
		for _, r := range rs {
			if strings.HasSuffix(r.Table, "_per_hour") && !strings.Contains(r.Table, "threat") && r.Mismatched != 1 {
				t.Errorf("%s: %d mismatched buckets, want 1", r.Table, r.Mismatched)
			}
		}
	})
}

func TestCheckAudit(t *testing.T) {
	dsn := testenv.MustMariaDB(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if _, err := migrations.Up(ctx, db, migrations.Audit); err != nil {
		t.Fatalf("migrate audit DB: %v", err)
	}
	start := time.Now().UTC().Add(-time.Minute)
	end := start.Add(30 * time.Second)
	seq := 0
	insertAs := func(rid, app string, outcome int, at time.Time) {
		_, err := db.ExecContext(ctx, `INSERT INTO audit_events (id, time, actor_app_id, action, outcome, request_id) VALUES (UNHEX(REPLACE(UUID(), '-', '')), ?, ?, 'events.collect', ?, ?)`, at, app, outcome, rid)
		if err != nil {
			t.Fatal(err)
		}
	}
	insert := func(n int, app string, outcome int, at time.Time) {
		for i := 0; i < n; i++ {
			seq++
			insertAs(fmt.Sprintf("req-%d", seq), app, outcome, at)
		}
	}
	insert(5, "demo-app", 202, start.Add(time.Second))
	// A request audited 202 and then retracted (its events' publish failed).
	insertAs("req-retracted", "demo-app", 202, start.Add(2*time.Second))
	insertAs("req-retracted", "demo-app", 503, start.Add(3*time.Second))
	insert(2, "demo-app", 401, start.Add(time.Second))  // not accepted
	insert(3, "other-app", 202, start.Add(time.Second)) // another app
	insert(4, "demo-app", 202, start.Add(-time.Hour))   // before the run
	// The end of the load just before this one (a sweep follows its warm-up
	// at once): the collector stamps a request when it receives it, on the
	// generator's own clock, so nothing of this run is before its start.
	insert(3, "demo-app", 202, start.Add(-time.Second))
	m := Manifest{AppID: "demo-app", Start: start, End: end, Requests: 5}
	a, err := CheckAudit(ctx, db, m, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a != (Audit{Expected: 5, Rows: 5}) {
		t.Errorf("CheckAudit = %+v, want 5 of 5", a)
	}
	m.Requests = 6
	if a, _ := CheckAudit(ctx, db, m, 0, nil); a.Rows != 5 {
		t.Errorf("CheckAudit = %+v, want 5 rows found", a)
	}
}

func TestReadIDs(t *testing.T) {
	ids, err := ReadIDs(strings.NewReader("# comment\na\n\n b \nc"))
	if err != nil || strings.Join(ids, ",") != "a,b,c" {
		t.Errorf("ReadIDs = %q, %v", ids, err)
	}
}
