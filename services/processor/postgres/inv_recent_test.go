package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
)

// TestStore_WriteBatch_InvRecent writes batches of events over ten days
// (devices and users in several apps, some days ahead, batches redelivered,
// two apps' writers at once) and checks the tables of migration events
// 000015 that the day tables' triggers keep: each device's (per threat
// type) and user's two most recent days in any app are the day tables' top
// two, and the all-apps threat and geo summaries are inv_threat_daily's and
// inv_geo_daily's sums over apps.
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
				SELECT device_id, threat, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
				FROM facts.inv_device_days GROUP BY 1, 2)
			SELECT count(*) FROM want w FULL JOIN facts.inv_device_recent r ON r.device_id = w.device_id AND r.threat = w.threat
			WHERE w.days[1] IS DISTINCT FROM r.last_day OR w.days[2] IS DISTINCT FROM r.prev_day`},
		{"users", `WITH want AS (
				SELECT user_pseudonym, (array_agg(DISTINCT day ORDER BY day DESC))[1:2] AS days
				FROM facts.inv_daily_users GROUP BY 1)
			SELECT count(*) FROM want w FULL JOIN facts.inv_user_recent r ON r.user_pseudonym = w.user_pseudonym
			WHERE w.days[1] IS DISTINCT FROM r.last_day OR w.days[2] IS DISTINCT FROM r.prev_day`},
	} {
		if n := pgtest.Count(t, pool, c.query); n != 0 {
			t.Errorf("%s: %d rows differ from the day tables", c.name, n)
		}
	}
	for _, c := range testenv.InvSummaryChecks {
		if n := pgtest.Count(t, pool, c.Query); n != 0 {
			t.Errorf("%s: %d keys differ from the day tables", c.Name, n)
		}
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM facts.inv_device_recent WHERE prev_day IS NOT NULL`); n == 0 {
		t.Error("no device seen on two days: the test's data misses the case")
	}
}

// BenchmarkStore_InvRecent measures what the investigation triggers cost
// the write path: the same events (THREATVIEW_DRAIN_BENCH_EVENTS, default
// 60,000, in batches of 2,000, one day, 8 apps, every event with a user and
// a grid cell) into a fresh database with every trigger on, with those of
// migrations events 000018 and 000020 off, and with all off, PostgreSQL's
// CPU per event (pgtest.BackendCPU). Two spreads: every
// event a new device and user (the worst case: each is a first sighting of
// the day), and the (50 M events a month over 1 M devices: about
// 1.7 events per device and day).
func BenchmarkStore_InvRecent(b *testing.B) {
	total := 60_000
	if v, err := strconv.Atoi(os.Getenv("THREATVIEW_DRAIN_BENCH_EVENTS")); err == nil && v > 0 {
		total = v
	}
	const size = 2000
	for _, spread := range []struct {
		name    string
		devices int
	}{{"new-device-each-event", 0}, {"1.7-events-per-device-day", total * 10 / 17}} {
		// all: every trigger; pairs: the devices and users per pair of days
		// (000020) off; recency: those and the map's places (000018) off,
		// 000015's on; none: all off.
		for _, triggers := range []string{"all", "daily", "pairs", "recency", "none"} {
			b.Run(fmt.Sprintf("%s/triggers=%s", spread.name, triggers), func(b *testing.B) {
				s, pool := mustStore(b)
				u, err := url.Parse(pool.Config().ConnString())
				if err != nil {
					b.Fatal(err)
				}
				db := strings.TrimPrefix(u.Path, "/")
				ctx := context.Background()
				var off []string
				switch triggers {
				case "none":
					for _, tb := range []string{"inv_device_days", "inv_daily_users", "inv_threat_daily", "inv_geo_daily"} {
						off = append(off, "ALTER TABLE facts."+tb+" DISABLE TRIGGER USER")
					}
				case "daily":
					off = append(off, "ALTER TABLE facts.inv_device_days DISABLE TRIGGER inv_daily_devices_add",
						"ALTER TABLE facts.inv_daily_users DISABLE TRIGGER inv_daily_users_add")
				case "pairs":
					off = append(off, "ALTER TABLE facts.inv_device_recent DISABLE TRIGGER USER", "ALTER TABLE facts.inv_user_recent DISABLE TRIGGER USER")
				case "recency":
					off = append(off, "ALTER TABLE facts.inv_device_days DISABLE TRIGGER inv_geo_places_add",
						"ALTER TABLE facts.inv_device_recent DISABLE TRIGGER USER", "ALTER TABLE facts.inv_user_recent DISABLE TRIGGER USER")
					for _, op := range []string{"insert", "update", "delete"} {
						off = append(off, "ALTER TABLE facts.inv_geo_daily DISABLE TRIGGER inv_geo_country_all_"+op)
					}
				}
				for _, q := range off {
					if _, err := pool.Exec(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				r := rand.New(rand.NewPCG(7, 8))
				now := time.Now().UTC()
				var batches [][]wire.Event
				for n := 0; n < total; n += size {
					batch := make([]wire.Event, min(size, total-n))
					for i := range batch {
						e := pgtest.Event(r, now.Add(time.Duration(n+i)*time.Microsecond), 0)
						e.App.ID = fmt.Sprintf("app-%d", r.IntN(8))
						if spread.devices > 0 {
							d := r.IntN(spread.devices)
							e.Device.ID, e.App.ID = fmt.Sprintf("dev-%d", d), fmt.Sprintf("app-%d", d%8)
						}
						e.User = &wire.User{Pseudonym: "k1:" + e.Device.ID}
						e.Location = &wire.Location{Lat: float64(r.IntN(100)) / 10, Lon: float64(r.IntN(100)) / 10}
						batch[i] = e
					}
					batches = append(batches, batch)
				}
				for b.Loop() {
					pg0, _ := pgtest.BackendCPU(db)
					start := time.Now()
					stored := 0
					for _, batch := range batches {
						res, err := s.WriteBatch(ctx, batch)
						if err != nil {
							b.Fatal(err)
						}
						stored += res.Stored
					}
					wall := time.Since(start)
					pg1, ok := pgtest.BackendCPU(db)
					if ok {
						b.ReportMetric(float64((pg1-pg0).Microseconds())/float64(stored), "pg-µs/event")
					}
					b.ReportMetric(float64(stored)/wall.Seconds(), "events/s")
					b.Logf("%d events in %v (%s)", stored, wall.Round(time.Millisecond), loadavg())
				}
			})
		}
	}
}
