package postgres_test

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/visualrenderer"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

// benchApps and benchCountries size the benchmark's year of hourly
// rollups. Each app has users in 25 of the 250 countries (every country
// belongs to some app) and events from benchPerHour of its 25 every hour,
// a different set each hour: 100 × 8,760 × benchPerHour rows (8.8 million
// with the default 10; BENCH_COUNTRIES_PER_APP_HOUR changes it, up to 25),
// plus the daily rollup and the summaries over all apps derived from them.
const (
	benchApps      = 100
	benchCountries = 250
)

func benchPerHour() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_COUNTRIES_PER_APP_HOUR")); err == nil && n >= 1 && n <= 25 {
		return n
	}
	return 10
}

// seedYear fills facts.events_by_country_per_hour with a year of hourly
// rows up to end (the primary key built after the load, as a restore does)
// and its summary over all apps.
func seedYear(b *testing.B, pool *pgxpool.Pool, end time.Time) int64 {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	for _, q := range []string{
		`ALTER TABLE facts.events_by_country_per_hour DROP CONSTRAINT events_by_country_per_hour_pkey`,
		`INSERT INTO facts.events_by_country_per_hour (app_id, bucket, country, count)
		 SELECT 'app-' || lpad(a::text, 3, '0'), $1::timestamptz + make_interval(hours => h),
		        chr(65 + ((a * 7 + ((h + k) % 25) * 10) % 250) / 26) || chr(65 + ((a * 7 + ((h + k) % 25) * 10) % 250) % 26),
		        1 + (a * 7 + k * 3 + h) % 40
		   FROM generate_series(1, ` + strconv.Itoa(benchApps) + `) a,
		        generate_series(0, 8759) h,
		        generate_series(0, least($2, 25) - 1) k`,
		`ALTER TABLE facts.events_by_country_per_hour ADD PRIMARY KEY (app_id, bucket, country)`,
		`INSERT INTO facts.all_apps_events_by_country_per_hour (bucket, country, count)
		 SELECT bucket, country, sum(count) FROM facts.events_by_country_per_hour GROUP BY 1, 2`,
		`INSERT INTO facts.events_by_country_per_day (app_id, bucket, country, count)
		 SELECT app_id, (bucket AT TIME ZONE 'UTC')::date, country, sum(count) FROM facts.events_by_country_per_hour GROUP BY 1, 2, 3`,
		`INSERT INTO facts.all_apps_events_by_country_per_day (bucket, country, count)
		 SELECT bucket, country, sum(count) FROM facts.events_by_country_per_day GROUP BY 1, 2`,
		`VACUUM ANALYZE facts.events_by_country_per_day`,
		`VACUUM ANALYZE facts.all_apps_events_by_country_per_day`,
		`VACUUM ANALYZE facts.events_by_country_per_hour`,
		`VACUUM ANALYZE facts.all_apps_events_by_country_per_hour`,
	} {
		var args []any
		if strings.Contains(q, "$1") { // the load
			args = []any{end.Add(-8760 * time.Hour), benchPerHour()}
		}
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			b.Fatalf("seed: %s: %v", q, err)
		}
	}
	var rows int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM facts.events_by_country_per_hour`).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d hourly rows (%d apps, %d of 25 countries an hour, %d countries in all) in %s", rows, benchApps, benchPerHour(), benchCountries, time.Since(start).Round(time.Second))
	return rows
}

// p95 reports the 95th percentile of ds in milliseconds.
func p95(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[(len(ds)*95+99)/100-1].Microseconds())/1000, "p95-ms")
}

// BenchmarkStore_Stats measures month-long hourly stats queries (top 10
// countries) over a year of hourly rollups for 100 apps and 250 countries.
func BenchmarkStore_Stats(b *testing.B) {
	url, pool := rtest.MustEventsDB(b)
	end := time.Now().UTC().Truncate(time.Hour)
	seedYear(b, pool, end)
	s, err := postgres.Open(context.Background(), url, 4)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	r := rand.New(rand.NewPCG(7, 8))
	query := func(app string) visualrenderer.Query {
		from := end.Add(-time.Duration(744+r.IntN(8760-744)) * time.Hour)
		return visualrenderer.Query{Dimension: visualrenderer.Country, AppID: app, Granularity: visualrenderer.Hour,
			From: from, To: from.Add(744 * time.Hour), Top: 10}
	}
	for _, bc := range []struct {
		name string
		app  func() string
	}{
		{"OneAppMonthHourly", func() string { return "app-" + leftPad(1+r.IntN(benchApps)) }},
		{"AllAppsMonthHourly", func() string { return "" }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				q := query(bc.app())
				t0 := time.Now()
				st, err := s.Stats(context.Background(), q)
				ds = append(ds, time.Since(t0))
				if err != nil || st.Total == 0 {
					b.Fatalf("Stats(%+v) = total %d, %v", q, st.Total, err)
				}
			}
			p95(b, ds)
		})
	}
}

func leftPad(n int) string {
	s := strconv.Itoa(n)
	for len(s) < 3 {
		s = "0" + s
	}
	return s
}
