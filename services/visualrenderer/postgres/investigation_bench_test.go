package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/platform/testenv"
	"threatview/visualrenderer"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

// BenchmarkInvestigation measures the read API's queries at
// INV_BENCH_EVENTS events (default 1 M, spread as testenv.SeedInvestigation
// says): p50 and p95 server time of searches by device, user, session and
// threat, a device timeline, and the overview and a threat report over 7
// days. Run:
//
//	INV_BENCH_EVENTS=1000000 go test -run '^$' -bench BenchmarkInvestigation -benchtime 1x ./postgres/
func BenchmarkInvestigation(b *testing.B) {
	url, pool := rtest.MustEventsDB(b)
	n := testenv.InvBenchEvents(1_000_000)
	end := time.Now().UTC()
	load := testenv.SeedInvestigation(b, pool, n, end)
	var size string
	_ = pool.QueryRow(context.Background(), `SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events.events'::regclass`).Scan(&size)
	b.Logf("%d events generated in %v (%.0f events/s with every index), events.events %s", n, load.Round(time.Millisecond), float64(n)/load.Seconds(), size)
	if os.Getenv("INV_BENCH_EXPLAIN") != "" {
		// Several queries are separated by ";;"; $1 is the first day of
		// the last 7, $2 tomorrow.
		for _, q := range strings.Split(os.Getenv("INV_BENCH_EXPLAIN"), ";;") {
			q = strings.NewReplacer("$1", "'"+end.AddDate(0, 0, -6).Format("2006-01-02")+"'::date",
				"$2", "'"+end.AddDate(0, 0, 1).Format("2006-01-02")+"'::date").Replace(q)
			b.Log("EXPLAIN " + q)
			rows, err := pool.Query(context.Background(), "EXPLAIN ANALYZE "+q)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
				var line string
				_ = rows.Scan(&line)
				b.Log(line)
			}
			rows.Close()
		}
	}
	// Parallel workers off, so each query's CPU is its backend's (a
	// worker's ends with it, uncounted); the renderer's pool as in run().
	db := url[strings.LastIndexByte(url, '/')+1:]
	if i := strings.IndexByte(db, '?'); i >= 0 {
		db = db[:i]
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := postgres.Open(context.Background(), url+sep+"options=-c%20max_parallel_workers_per_gather%3D0", 4)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tax, _ := s.Taxonomy(ctx)
	f := visualrenderer.EventFilter{From: end.Add(-7 * 24 * time.Hour), To: end.Add(time.Second), Limit: 50}
	day := end.Truncate(24 * time.Hour)
	week := visualrenderer.RollupQuery{From: day.Add(-6 * 24 * time.Hour), To: day.Add(24 * time.Hour), K: 5}
	cases := []struct {
		name string
		run  func(i int) error
	}{
		{"search/device", func(i int) error {
			g := f
			g.DeviceID = "dev-" + strconv.Itoa(i*7%(n/50+1))
			_, err := s.SearchEvents(ctx, g, tax)
			return err
		}},
		{"search/user", func(i int) error {
			var p string
			_ = pool.QueryRow(ctx, `SELECT 'k1:' || md5('u' || $1::text)`, i*11%(n/100+1)).Scan(&p)
			g := f
			g.Users = []string{p}
			_, err := s.SearchEvents(ctx, g, tax)
			return err
		}},
		{"search/session", func(i int) error {
			g := f
			g.SessionID = "ses-" + strconv.Itoa(i*13%(n/17+1))
			_, err := s.SearchEvents(ctx, g, tax)
			return err
		}},
		{"search/threat", func(i int) error {
			g := f
			g.Threat = []string{"Hooks", "Debug", "Malware", "MultiInstance"}[i%4]
			_, err := s.SearchEvents(ctx, g, tax)
			return err
		}},
		{"search/latest", func(i int) error { _, err := s.SearchEvents(ctx, f, tax); return err }},
		{"timeline/device", func(i int) error {
			_, err := s.Timeline(ctx, "device", []string{"dev-" + strconv.Itoa(i*17%(n/50+1))}, "", tax)
			if err != nil && !isNotFound(err) {
				return err
			}
			return nil
		}},
		{"overview/7d", func(i int) error { _, err := s.Overview(ctx, week); return err }},
		{"overview/yesterday", func(i int) error {
			_, err := s.Overview(ctx, visualrenderer.RollupQuery{From: day.Add(-24 * time.Hour), To: day})
			return err
		}},
		{"overview/7d/app", func(i int) error {
			q := week
			q.AppID = "app-" + strconv.Itoa(i%200)
			_, err := s.Overview(ctx, q)
			return err
		}},
		{"report/7d", func(i int) error {
			_, err := s.ThreatReport(ctx, week, visualrenderer.ThreatSelection{Types: []string{"Hooks"}})
			return err
		}},
		{"report/7d/app", func(i int) error {
			q := week
			q.AppID = "app-" + strconv.Itoa(i%200)
			_, err := s.ThreatReport(ctx, q, visualrenderer.ThreatSelection{Types: []string{"Hooks"}})
			return err
		}},
		{"map/7d", func(i int) error { _, err := s.Map(ctx, week); return err }},
		// The analyst's home page draws the previous day's map (issue 40).
		{"map/yesterday", func(i int) error {
			_, err := s.Map(ctx, visualrenderer.RollupQuery{From: day.Add(-24 * time.Hour), To: day, K: 5})
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			const runs = 40
			var d []time.Duration
			cpu0 := backendCPU(db)
			for i := range runs {
				t0 := time.Now()
				if err := c.run(i); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(t0))
			}
			cpu := (backendCPU(db) - cpu0) / runs
			slices.Sort(d)
			b.ReportMetric(float64(d[runs/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(d[runs*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000, "pg-cpu-ms/op")
			b.Log(fmt.Sprintf("%s at %d events: p50 %v p95 %v, PostgreSQL CPU %v/op", c.name, n, d[runs/2], d[runs*95/100], cpu))
		})
	}
}

func isNotFound(err error) bool { return errors.Is(err, visualrenderer.ErrNotFound) }

// backendCPU is the CPU time of the PostgreSQL backends connected to
// database db (a read's cost: no background writers), 0 without the server
// on this machine.
func backendCPU(db string) time.Duration {
	cpu, _ := testenv.PostgresCPU(db, false)
	return cpu
}
