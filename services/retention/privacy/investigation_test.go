package privacy_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/invkeys"
	"threatview/platform/testenv"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/privacy"
)

// fillInvestigation stores n events of two apps with the investigation
// columns (users shared between devices, devices shared between users,
// threats none, one or several, locations and OS versions present or
// not, over four days and several hours) with their facts, and the
// investigation rollups the processor would have written for them: the
// platform/invkeys selects over events.events, the processor's own.
func fillInvestigation(tb testing.TB, pool *pgxpool.Pool, n int) {
	tb.Helper()
	ctx := context.Background()
	stmts := []string{
		`INSERT INTO facts.device_models_dim (manufacturer, model) VALUES ('Google', 'Pixel 8'), ('Apple', 'iPhone15,2')`,
		`INSERT INTO events.events (id, received_at, occurred_at, type, app_id, app_version, device_id, device_model,
			manufacturer, os, os_version, country, payload, session_id, user_pseudonym, language, os_major, os_minor, lat, lon, threat_types)
		SELECT gen_random_uuid(), r, r - (g % 4) * interval '1 day' - (g % 7) * interval '1 hour',
			CASE WHEN g % 5 = 0 THEN 'network.info' ELSE 'app.startup' END,
			'app-' || (g % 2), '2.' || (g % 3), 'd-' || (g % 5),
			CASE WHEN g % 2 = 0 THEN 'Pixel 8' ELSE 'iPhone15,2' END, CASE WHEN g % 2 = 0 THEN 'Google' ELSE 'Apple' END,
			CASE WHEN g % 2 = 0 THEN 'android' ELSE 'ios' END, CASE WHEN g % 6 = 0 THEN 'beta' ELSE (12 + g % 3) || '.' || (g % 2) || '.1' END,
			(ARRAY['DE', 'FR', 'US'])[1 + g % 3], '{}', 's-' || (g % 11),
			CASE WHEN g % 4 = 3 THEN '' ELSE 'k1:u-' || (g % 3) END, 'de-DE',
			CASE WHEN g % 6 = 0 THEN NULL ELSE 12 + g % 3 END, CASE WHEN g % 6 = 0 THEN NULL ELSE g % 2 END,
			CASE WHEN g % 3 = 0 THEN NULL ELSE 48.1 + (g % 2) END, CASE WHEN g % 3 = 0 THEN NULL ELSE 11.5 END,
			CASE WHEN g % 5 = 0 THEN '{}' WHEN g % 5 = 1 THEN '{Hooks}' WHEN g % 5 = 2 THEN '{Hooks,root_detected}' ELSE '{Debug}' END::text[]
		FROM generate_series(1, $1::int) g, LATERAL (SELECT now() - g * (interval '28 hours' / $1::int) AS r) t`,
		// A user seen on d-3 only: erasing d-3 leaves no event of theirs.
		`INSERT INTO events.events (id, received_at, occurred_at, type, app_id, device_id, device_model, manufacturer, os,
			country, user_pseudonym, threat_types)
		SELECT gen_random_uuid(), now() - g * interval '5 hours', now() - g * interval '5 hours', 'app.startup', 'app-1', 'd-3',
			'Pixel 8', 'Google', 'android', 'FR', 'k1:only-d3', '{}' FROM generate_series(1, 12) g`,
		`INSERT INTO facts.facts (event_id, received_at, occurred_at, app_id, country, device_model_id, os, threats)
		SELECT e.id, e.received_at, e.occurred_at, e.app_id, e.country, d.id, e.os, e.threat_types
		  FROM events.events e JOIN facts.device_models_dim d ON d.manufacturer = e.manufacturer AND d.model = e.device_model`,
	}
	for i, q := range stmts {
		var args []any
		if i == 1 {
			args = []any{n}
		}
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	fillInvRollups(tb, pool)
}

// fillInvRollups writes the investigation rollups of the stored events as
// the processor would have: the platform/invkeys selects over events.events.
func fillInvRollups(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	keys := "WITH " + invkeys.Keys("events.events")
	for table, rows := range map[string]string{"inv_daily": invkeys.Daily, "inv_daily_users": invkeys.DailyUsers,
		"inv_device_days": invkeys.DeviceDays, "inv_geo_daily": invkeys.Geo, "inv_threat_daily": invkeys.Threats} {
		if _, err := pool.Exec(context.Background(), "INSERT INTO facts."+table+" "+keys+" "+rows); err != nil {
			tb.Fatalf("fill %s: %v", table, err)
		}
	}
}

// invRecount is each investigation rollup recounted from events.events,
// written out here (not with invkeys) so the test checks the definition
// as well as the arithmetic.
var invRecount = map[string]struct{ want, have string }{
	"inv_daily": {
		`SELECT (occurred_at AT TIME ZONE 'UTC')::date, app_id, count(*), count(*) FILTER (WHERE cardinality(threat_types) > 0)
		   FROM events.events GROUP BY 1, 2`,
		`SELECT day, app_id, events, threat_events FROM facts.inv_daily`},
	"inv_daily_users": {
		`SELECT DISTINCT (occurred_at AT TIME ZONE 'UTC')::date, app_id, user_pseudonym FROM events.events WHERE user_pseudonym <> ''`,
		`SELECT day, app_id, user_pseudonym FROM facts.inv_daily_users`},
	"inv_device_days": {
		`SELECT DISTINCT (occurred_at AT TIME ZONE 'UTC')::date, app_id, t, country,
		        coalesce(lat::text || ',' || lon::text, ''), device_id
		   FROM events.events, unnest(array_append(threat_types, '')) AS t WHERE device_id <> ''`,
		`SELECT day, app_id, threat, country, cell, device_id FROM facts.inv_device_days`},
	"inv_geo_daily": {
		`SELECT (occurred_at AT TIME ZONE 'UTC')::date, app_id, t, country, coalesce(lat::text || ',' || lon::text, ''), count(*)
		   FROM events.events, unnest(array_append(threat_types, '')) AS t GROUP BY 1, 2, 3, 4, 5`,
		`SELECT day, app_id, threat, country, cell, events FROM facts.inv_geo_daily`},
	"inv_threat_daily": {
		`SELECT (occurred_at AT TIME ZONE 'UTC')::date, app_id, t, dim, key, count(*)
		   FROM events.events, unnest(threat_types) AS t, LATERAL (VALUES ('os', os),
		        ('os_version', CASE WHEN os_major IS NULL THEN rtrim(os || ' ' || os_version) ELSE format('%s %s.%s', os, os_major, os_minor) END),
		        ('device_model', manufacturer || ' ' || device_model), ('country', country::text), ('app_version', app_version),
		        ('hour', lpad(extract(hour FROM occurred_at AT TIME ZONE 'UTC')::text, 2, '0'))) AS d(dim, key)
		  GROUP BY 1, 2, 3, 4, 5`,
		`SELECT day, app_id, threat, dim, key, count FROM facts.inv_threat_daily`},
	// The all-apps threat summary (migration 000015's triggers follow
	// inv_threat_daily's every change, the erasure's too), without rows at
	// zero, which a report over all apps would list.
	"inv_threat_daily_all": {
		`SELECT day, threat, dim, key, sum(count) FROM facts.inv_threat_daily GROUP BY 1, 2, 3, 4`,
		`SELECT day, threat, dim, key, count FROM facts.inv_threat_daily_all`},
}

// invOff returns, per investigation rollup, how many rows differ from a
// recount over the remaining events (rows missing, extra or with another
// count).
func invOff(tb testing.TB, pool *pgxpool.Pool) map[string]int64 {
	tb.Helper()
	off := map[string]int64{}
	for table, q := range invRecount {
		var n int64
		err := pool.QueryRow(context.Background(), `WITH want AS (`+q.want+`), have AS (`+q.have+`)
			SELECT (SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM have) a)
			     + (SELECT count(*) FROM (SELECT * FROM have EXCEPT ALL SELECT * FROM want) b)`).Scan(&n)
		if err != nil {
			tb.Fatalf("%s: %v", table, err)
		}
		if n != 0 {
			off[table] = n
		}
	}
	return off
}

// TestRunner_ErasesInvestigationCounts: erasing a device and then a user
// (in small batches, through the runner) leaves every investigation
// rollup equal to a recount over the events that remain: the counts of
// facts.inv_daily, inv_geo_daily and inv_threat_daily lose exactly the
// erased events, rows at zero go, and the distinct rows of the erased
// device's users and the erased user's devices that no remaining event
// makes go too. Before, only inv_device_days and inv_daily_users rows of
// the subject itself went: the counts still held the erased events.
func TestRunner_ErasesInvestigationCounts(t *testing.T) {
	url, _ := retentiontest.Postgres(t)
	pool := open(t, url)
	fillInvestigation(t, pool, 240)
	if off := invOff(t, pool); len(off) != 0 {
		t.Fatalf("fixture: rollups off a recount before any erasure: %v", off)
	}
	ctx := context.Background()
	pg := privacy.NewPG(pool)
	r := privacy.NewRunner(pg, nil, privacy.RunnerConfig{BatchRows: 7, Poll: 20 * time.Millisecond},
		privacy.NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler))
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx, pool) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	count := func(q string, args ...any) (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	for _, e := range []*privacy.Erasure{
		{AppID: "app-1", DeviceID: "d-3"},
		{AppID: "app-0", UserPseudonyms: []string{"k1:u-1"}},
	} {
		name := e.DeviceID + e.AppID
		before := count(`SELECT count(*) FROM events.events`)
		e.ID, e.RequestedBy = uuid.Must(uuid.NewV7()).String(), "test"
		if err := pg.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := pg.Queue(ctx, e); err != nil {
			t.Fatal(err)
		}
		r.Wake()
		var got *privacy.Erasure
		testenv.MustPing(t, time.Minute, "erasure finished", func() error {
			var err error
			if got, err = pg.Get(ctx, e.ID); err == nil && got.Status != privacy.StatusDone && got.Status != privacy.StatusFailed {
				err = fmt.Errorf("status %s", got.Status)
			}
			return err
		})
		if got.Status != privacy.StatusDone {
			t.Fatalf("%s: erasure %s: %s", name, got.Status, got.Error)
		}
		if got.Report.Events < 10 || got.Report.Batches < 2 || before-count(`SELECT count(*) FROM events.events`) != got.Report.Events {
			t.Fatalf("%s: report %+v; want at least 10 events in 2 batches, all gone", name, got.Report)
		}
		if off := invOff(t, pool); len(off) != 0 {
			t.Errorf("%s erased: rows off a recount of the remaining events: %v", name, off)
		}
		for _, c := range testenv.InvSummaryChecks {
			if n := count(c.Query); n != 0 {
				t.Errorf("%s erased: %s: %d keys differ from the day tables", name, c.Name, n)
			}
		}
	}
	for _, q := range []string{
		`SELECT count(*) FROM facts.inv_device_days WHERE app_id = 'app-1' AND device_id = 'd-3'`,
		`SELECT count(*) FROM facts.inv_daily_users WHERE app_id = 'app-0' AND user_pseudonym = 'k1:u-1'`,
		`SELECT count(*) FROM facts.inv_daily_users WHERE user_pseudonym = 'k1:only-d3'`,
	} {
		if n := count(q); n != 0 {
			t.Errorf("%s = %d, want 0", q, n)
		}
	}
	// Whatever the erasures left, the rows of the other apps and subjects
	// are still counted (the fixture is not all erased).
	if n := count(`SELECT sum(events) FROM facts.inv_daily`); n < 150 {
		t.Errorf("inv_daily holds %d events after the erasures, want the others' (at least 150)", n)
	}
}
