package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
)

// TestStore_WriteBatch_InvRecent writes batches of events over ten days
// (devices and users in several apps, some days ahead, batches redelivered,
// two apps' writers at once) and checks the tables of migration events
// 000015 that the day tables' triggers keep: each device's, user's and
// device place's two most recent days, per app and over all apps, are the
// day tables' top two, and the all-apps threat and geo summaries are
// inv_threat_daily's and inv_geo_daily's sums over apps.
func TestStore_WriteBatch_InvRecent(t *testing.T) {
	s, pool := mustStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	batch := func(seed uint64, app string) []wire.Event {
		r := rand.New(rand.NewPCG(seed, 15))
		evs := make([]wire.Event, 200)
		for i := range evs {
			e := pgtest.Event(r, now, 0)
			if app != "" {
				e.App.ID = app
			}
			e.OccurredAt = now.AddDate(0, 0, -r.IntN(10))
			if r.IntN(20) == 0 {
				e.OccurredAt = now.AddDate(0, 0, 1+r.IntN(2))
			}
			e.Device.ID = fmt.Sprintf("dev-%d", r.IntN(30))
			e.User = &wire.User{Pseudonym: fmt.Sprintf("k1:u%d", r.IntN(20))}
			evs[i] = e
		}
		return evs
	}
	for seed := range uint64(6) {
		b := batch(seed, "")
		write(t, s, b...)
		write(t, s, b[:50]...) // a redelivery: stored and counted nowhere again
	}
	var wg sync.WaitGroup
	for i, app := range []string{"app-0", "app-1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.WriteBatch(ctx, batch(uint64(100+i), app)); err != nil {
				t.Errorf("WriteBatch(%s): %v", app, err)
			}
		}()
	}
	wg.Wait()

	for _, c := range []struct{ name, query string }{
		{"devices", `WITH want AS (
				SELECT device_id, threat, app, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
				FROM facts.inv_device_days CROSS JOIN LATERAL (VALUES (app_id), ('')) AS a(app) GROUP BY 1, 2, 3)
			SELECT count(*) FROM want w FULL JOIN facts.inv_device_recent r
				ON r.device_id = w.device_id AND r.threat = w.threat AND r.app_id = w.app
			WHERE w.days[1] IS DISTINCT FROM r.last_day OR w.days[2] IS DISTINCT FROM r.prev_day`},
		{"users", `WITH want AS (
				SELECT user_pseudonym, app, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
				FROM facts.inv_daily_users CROSS JOIN LATERAL (VALUES (app_id), ('')) AS a(app) GROUP BY 1, 2)
			SELECT count(*) FROM want w FULL JOIN facts.inv_user_recent r
				ON r.user_pseudonym = w.user_pseudonym AND r.app_id = w.app
			WHERE w.days[1] IS DISTINCT FROM r.last_day OR w.days[2] IS DISTINCT FROM r.prev_day`},
		{"places", `WITH want AS (
				SELECT device_id, p.place, a.app, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
				FROM facts.inv_device_days CROSS JOIN LATERAL (VALUES (app_id), ('')) AS a(app)
					CROSS JOIN LATERAL (VALUES ('c:' || country), ('g:' || nullif(cell, ''))) AS p(place)
				WHERE threat = '' AND p.place IS NOT NULL GROUP BY 1, 2, 3)
			SELECT count(*) FROM want w FULL JOIN facts.inv_place_recent r
				ON r.device_id = w.device_id AND r.place = w.place AND r.app_id = w.app
			WHERE w.days[1] IS DISTINCT FROM r.last_day OR w.days[2] IS DISTINCT FROM r.prev_day`},
		{"geo over all apps", `SELECT count(*) FROM (
				SELECT day, threat, country, cell, sum(events) AS events FROM facts.inv_geo_daily GROUP BY 1, 2, 3, 4) a
			FULL JOIN facts.inv_geo_daily_all b USING (day, threat, country, cell)
			WHERE a.events IS DISTINCT FROM b.events`},
		{"threats over all apps", `SELECT count(*) FROM (
				SELECT day, threat, dim, key, sum(count) AS count FROM facts.inv_threat_daily GROUP BY 1, 2, 3, 4) a
			FULL JOIN facts.inv_threat_daily_all b USING (day, threat, dim, key)
			WHERE a.count IS DISTINCT FROM b.count`},
	} {
		if n := pgtest.Count(t, pool, c.query); n != 0 {
			t.Errorf("%s: %d rows differ from the day tables", c.name, n)
		}
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM facts.inv_device_recent WHERE prev_day IS NOT NULL AND app_id = ''`); n == 0 {
		t.Error("no device seen on two days: the test's data misses the case")
	}
}
