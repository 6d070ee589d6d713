package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"threatview/platform/testenv"
	"threatview/visualrenderer"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

// TestStore_RecentExact writes random day rows (several statements, repeats,
// days after today, erasures of devices and users, old days deleted) and
// checks the fast distinct counts (recency tables, migration events 000015)
// against count(DISTINCT) over the day tables for ranges ending today,
// yesterday and arbitrary ones, per app and over all apps (the overview's,
// the threat report's and the map's devices), and the all-apps threat and
// geo summaries against the sums over apps.
func TestStore_RecentExact(t *testing.T) {
	url, pool := rtest.MustEventsDB(t)
	s, err := postgres.Open(context.Background(), url, 2)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
	}
	r := rand.New(rand.NewPCG(39, 15))
	today := time.Now().UTC().Truncate(24 * time.Hour)
	threats := []string{"", "Hooks", "Debug", "Malware"}
	for batch := range 12 {
		var days []time.Time
		var apps, devs, users, thr, dims, keys, cells []string
		var counts []int64
		for range 150 {
			// Mostly the last 10 days; now and then up to 3 days ahead.
			d := today.AddDate(0, 0, -r.IntN(10))
			if r.IntN(20) == 0 {
				d = today.AddDate(0, 0, 1+r.IntN(3))
			}
			days = append(days, d)
			apps = append(apps, fmt.Sprintf("app-%d", r.IntN(3)))
			devs = append(devs, fmt.Sprintf("dev-%d", r.IntN(40)))
			users = append(users, fmt.Sprintf("k1:u%d", r.IntN(30)))
			thr = append(thr, threats[r.IntN(len(threats))])
			dims = append(dims, []string{"os", "country", "hour"}[r.IntN(3)])
			keys = append(keys, fmt.Sprintf("k%d", r.IntN(4)))
			// A grid cell, or none (an event without a location).
			cells = append(cells, []string{"", "1.5,2.5", "1.5,2.6", "-3.1,40.2"}[r.IntN(4)])
			counts = append(counts, int64(1+r.IntN(5)))
		}
		exec(`INSERT INTO facts.inv_device_days (day, app_id, threat, country, cell, device_id)
			SELECT * FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) ON CONFLICT DO NOTHING`,
			days, apps, thr, keys, cells, devs)
		exec(`INSERT INTO facts.inv_daily_users (day, app_id, user_pseudonym)
			SELECT DISTINCT * FROM unnest($1::date[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING`, days, apps, users)
		exec(`INSERT INTO facts.inv_daily (day, app_id, events, threat_events)
			SELECT DISTINCT d, a, 1, 0 FROM unnest($1::date[], $2::text[]) AS x(d, a) ON CONFLICT DO NOTHING`, days, apps)
		exec(`INSERT INTO facts.inv_threat_daily AS r (day, app_id, threat, dim, key, count)
			SELECT d, a, coalesce(nullif(t, ''), 'Hooks'), m, k, sum(c) FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) AS x(d, a, t, m, k, c)
			GROUP BY 1, 2, 3, 4, 5 ON CONFLICT (day, threat, dim, app_id, key) DO UPDATE SET count = r.count + EXCLUDED.count`,
			days, apps, thr, dims, keys, counts)
		exec(`INSERT INTO facts.inv_geo_daily AS r (day, app_id, threat, country, cell, events)
			SELECT d, a, t, k, m, sum(c) FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) AS x(d, a, t, k, m, c)
			GROUP BY 1, 2, 3, 4, 5 ON CONFLICT (day, threat, app_id, country, cell) DO UPDATE SET events = r.events + EXCLUDED.events`,
			days, apps, thr, keys, cells, counts)
		switch batch {
		case 4: // an erasure of a device in one app, of a user in another
			exec(`DELETE FROM facts.inv_device_days WHERE app_id = 'app-1' AND device_id = ANY('{dev-1,dev-2,dev-3}')`)
			exec(`DELETE FROM facts.inv_daily_users WHERE app_id = 'app-2' AND user_pseudonym = ANY('{k1:u1,k1:u2}')`)
			exec(`UPDATE facts.inv_threat_daily SET count = count - 1 WHERE app_id = 'app-1' AND count > 1`)
		case 8: // old days go, and a device everywhere
			exec(`DELETE FROM facts.inv_device_days WHERE day < $1`, today.AddDate(0, 0, -7))
			exec(`DELETE FROM facts.inv_device_days WHERE device_id = 'dev-7'`)
			exec(`DELETE FROM facts.inv_daily_users WHERE day < $1`, today.AddDate(0, 0, -6))
			exec(`DELETE FROM facts.inv_threat_daily WHERE key = 'k0'`)
			exec(`DELETE FROM facts.inv_geo_daily WHERE country = 'k1'`)
			exec(`UPDATE facts.inv_geo_daily SET events = events + 1 WHERE cell = '1.5,2.5'`)
		}
	}

	count := func(q string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
		return n
	}
	type span struct {
		name     string
		from, to time.Time
	}
	spans := []span{
		{"Today", today, today.AddDate(0, 0, 1)},
		{"Yesterday", today.AddDate(0, 0, -1), today},
		{"Last7Days", today.AddDate(0, 0, -6), today.AddDate(0, 0, 1)},
		{"WithAhead", today.AddDate(0, 0, -3), today.AddDate(0, 0, 5)},
	}
	for range 12 {
		from := today.AddDate(0, 0, -r.IntN(12))
		spans = append(spans, span{"Random", from, from.AddDate(0, 0, 1+r.IntN(8))})
	}
	// Subjects whose two recent days are both at or after the range's end
	// are looked up one by one (limit 1,000), or the day table is counted
	// (limit 0).
	for _, limit := range []int{1000, 0} {
		postgres.SetAmbiguousLimit(limit)
		t.Cleanup(func() { postgres.SetAmbiguousLimit(1000) })
		for _, sp := range spans {
			for _, app := range []string{"", "app-0", "app-1", "app-2"} {
				q := visualrenderer.RollupQuery{AppID: app, From: sp.from, To: sp.to}
				name := fmt.Sprintf("limit %d/%s/%s..%s/app=%q", limit, sp.name, sp.from.Format("01-02"), sp.to.Format("01-02"), app)
				o, err := s.Overview(ctx, q)
				if err != nil {
					t.Fatalf("%s: Overview: %v", name, err)
				}
				wantUsers := count(`SELECT count(DISTINCT user_pseudonym) FROM facts.inv_daily_users
				WHERE day >= $1 AND day < $2 AND ($3 = '' OR app_id = $3)`, sp.from, sp.to, app)
				wantDevices := count(`SELECT count(DISTINCT device_id) FROM facts.inv_device_days
				WHERE day >= $1 AND day < $2 AND threat = '' AND ($3 = '' OR app_id = $3)`, sp.from, sp.to, app)
				if o.Users != wantUsers || o.Devices != wantDevices {
					t.Errorf("%s: Overview users %d devices %d, want %d and %d (count DISTINCT)", name, o.Users, o.Devices, wantUsers, wantDevices)
				}
				// The map of all events and of one type: countries, and
				// cells with at least K = 2 devices.
				for _, threat := range []string{"", "Hooks"} {
					q.K, q.Threat = 2, threat
					m, err := s.Map(ctx, q)
					if err != nil {
						t.Fatalf("%s: Map: %v", name, err)
					}
					got := map[string][2]int64{}
					for _, c := range m.Countries {
						got[c.Country] = [2]int64{c.Events, c.Devices}
					}
					for _, c := range m.Cells {
						got[fmt.Sprintf("%g,%g", c.Lat, c.Lon)] = [2]int64{c.Events, c.Devices}
					}
					want := map[string][2]int64{}
					rows, err := pool.Query(ctx, `SELECT g.country::text, g.events, (SELECT count(DISTINCT device_id) FROM facts.inv_device_days d
						WHERE d.day >= $1 AND d.day < $2 AND d.threat = $4 AND d.country = g.country AND ($3 = '' OR d.app_id = $3))
					FROM (SELECT country, sum(events) AS events FROM facts.inv_geo_daily
						WHERE day >= $1 AND day < $2 AND threat = $4 AND ($3 = '' OR app_id = $3) GROUP BY 1) g
					UNION ALL
					SELECT d.cell, (SELECT coalesce(sum(events), 0) FROM facts.inv_geo_daily g
						WHERE g.day >= $1 AND g.day < $2 AND g.threat = $4 AND g.cell = d.cell AND ($3 = '' OR g.app_id = $3)),
						count(DISTINCT device_id) FROM facts.inv_device_days d
					WHERE d.day >= $1 AND d.day < $2 AND d.threat = $4 AND d.cell <> '' AND ($3 = '' OR d.app_id = $3)
					GROUP BY 1 HAVING count(DISTINCT device_id) >= 2`, sp.from, sp.to, app, threat)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var c string
						var v [2]int64
						if err := rows.Scan(&c, &v[0], &v[1]); err != nil {
							t.Fatal(err)
						}
						want[c] = v
					}
					rows.Close()
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s: Map of %q = %v, over the day tables %v", name, threat, got, want)
					}
				}
				q.Threat = ""
				for _, sel := range [][]string{{"Hooks"}, {"Debug", "Malware"}} {
					got, err := postgres.DistinctDevices(ctx, s, q, sel)
					want := count(`SELECT count(DISTINCT device_id) FROM facts.inv_device_days
					WHERE day >= $1 AND day < $2 AND threat = ANY($4) AND ($3 = '' OR app_id = $3)`, sp.from, sp.to, app, sel)
					if err != nil || got != want {
						t.Errorf("%s: devices with %v = %d, %v; want %d", name, sel, got, err, want)
					}
				}
			}
		}
	}
	for _, c := range testenv.InvSummaryChecks {
		if n := count(c.Query); n != 0 {
			t.Errorf("%s: %d keys differ from the day tables", c.Name, n)
		}
	}
}
