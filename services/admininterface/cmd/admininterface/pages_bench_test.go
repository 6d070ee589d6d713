package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/platform/testenv"
)

// BenchmarkAnalystPages measures the analyst's pages as the admin interface
// serves them (issue 40's bound: every page's server time at most 300 ms
// p95 with 50 M events in the month): a fresh events DB seeded with
// INV_BENCH_EVENTS events (default 200,000; testenv.SeedInvestigation, the
// renderer's BenchmarkInvestigation's data), this tree's visual renderer
// on it and admin interface in front of it, each a process of its own on
// loopback, and an analyst signed in through the stack's identity. Each
// page is requested 100 times in turn; the figures are the time to the full
// response body (p50, p95) and the CPU per page of the renderer, the admin
// interface and PostgreSQL's backends of the database (parallel workers
// uncounted). The renderer audits timeline reads at the stack's audit
// logger, as deployed. Run:
//
//	. .run/env && cd services/admininterface && INV_BENCH_EVENTS=1000000 \
//	  go test -run '^$' -bench BenchmarkAnalystPages -benchtime 1x -timeout 60m ./cmd/admininterface/
func BenchmarkAnalystPages(b *testing.B) {
	identity := testenv.MustEnv(b, "THREATVIEW_IDENTITY_URL")
	adminKey := testenv.MustEnv(b, "THREATVIEW_ADMIN_KEY")
	auditURL := testenv.MustEnv(b, "THREATVIEW_AUDIT_URL")
	internal := testenv.MustEnv(b, "INTERNAL_KEY")
	ctx := context.Background()
	dbURL := testenv.MustPostgres(b)
	migrate := exec.Command(testenv.MustBuild(b, "./migrations/cmd/migrate"), "-db", "events")
	migrate.Env = []string{"EVENTS_DATABASE_URL=" + dbURL}
	if out, err := migrate.CombinedOutput(); err != nil {
		b.Fatalf("migrate the events DB: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	n := testenv.InvBenchEvents(200_000)
	end := time.Now().UTC()
	load := testenv.SeedInvestigation(b, conn, n, end)
	// The home page's threat list reads the per-day threat rollup over
	// apps, which the processor keeps beside the investigation rollups.
	if _, err := conn.Exec(ctx, `INSERT INTO facts.all_apps_events_by_threat_per_day (bucket, threat, count)
		SELECT (occurred_at AT TIME ZONE 'UTC')::date, t, count(*) FROM events.events, unnest(threat_types) t GROUP BY 1, 2`); err != nil {
		b.Fatal(err)
	}
	// Devices and sessions that have events, in a scrambled order (ids are
	// md5 uuids).
	const runs = 100
	var devices, sessions []string
	rows, err := conn.Query(ctx, `SELECT device_id, session_id FROM events.events ORDER BY id LIMIT $1`, runs)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var d, s string
		if err := rows.Scan(&d, &s); err != nil {
			b.Fatal(err)
		}
		devices, sessions = append(devices, d), append(sessions, s)
	}
	if rows.Err() != nil || len(devices) < runs {
		b.Fatalf("%d devices to look up (%v), want %d", len(devices), rows.Err(), runs)
	}
	conn.Close(ctx)

	renderer := testenv.StartService(b, "./services/visualrenderer/cmd/visualrenderer", "",
		"RENDERER_DATABASE_URL="+dbURL, "IDENTITY_SERVICE_URL="+identity, "AUDITLOGGER_SERVICE_URL="+auditURL,
		"INTERNAL_KEY="+internal, "LOG_LEVEL=warn")
	ui := testenv.StartAdminInterface(b, "", identity, "VISUALRENDERER_SERVICE_URL="+renderer.URL,
		"INTERNAL_KEY="+internal, "ADMINUI_SECURE_COOKIES=false", "LOG_LEVEL=warn")
	hc := analystSession(b, ui.URL, identity, adminKey)

	threats := []string{"Hooks", "Debug", "Malware", "MultiInstance", "AppIntegrity", "Simulator"}
	cases := []struct {
		name   string
		path   func(i int) string
		marker string // in every answer: the page drew its data
	}{
		{"home", func(int) string { return "/" }, `id="n-events"`},
		{"events-today", func(int) string { return "/events?period=today" }, `data-event=`},
		{"events-yesterday", func(int) string { return "/events?period=yesterday" }, `data-event=`},
		{"events-7d", func(int) string { return "/events?period=7d" }, `data-event=`},
		{"timeline-device", func(i int) string { return "/timelines/device/" + devices[i] }, `All fields<span`},
		{"timeline-session", func(i int) string { return "/timelines/session/" + sessions[i] }, `All fields<span`},
		{"report-7d", func(i int) string { return "/reports/threats/" + threats[i%len(threats)] + "?period=7d" }, `id="r-events"`},
	}
	db := dbURL[strings.LastIndexByte(dbURL, '/')+1:]
	if i := strings.IndexByte(db, '?'); i >= 0 {
		db = db[:i]
	}
	b.Run("events="+strconv.Itoa(n), func(b *testing.B) {
		for _, c := range cases {
			b.Run(c.name, func(b *testing.B) {
				var d []time.Duration
				var size int
				rcpu0, ucpu0 := processCPU(b, renderer.URL), processCPU(b, ui.URL)
				pg0, _ := testenv.PostgresCPU(db, false)
				for i := range runs {
					path := c.path(i)
					t0 := time.Now()
					resp, err := hc.Get(ui.URL + path)
					if err != nil {
						b.Fatal(err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					d = append(d, time.Since(t0))
					if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(c.marker)) {
						b.Fatalf("GET %s = %d (%v), want 200 with %s:\n%.600s\nrenderer log:\n%s", path, resp.StatusCode, err, c.marker, body, renderer.Log)
					}
					size += len(body)
				}
				rcpu := (processCPU(b, renderer.URL) - rcpu0) / runs
				ucpu := (processCPU(b, ui.URL) - ucpu0) / runs
				pg1, _ := testenv.PostgresCPU(db, false)
				pg := (pg1 - pg0) / runs
				slices.Sort(d)
				p50, p95 := d[runs/2], d[runs*95/100]
				var sum time.Duration
				for _, x := range d {
					sum += x
				}
				// ns/op is a page's mean time, not the whole run's.
				b.ReportMetric(float64(sum.Nanoseconds()/runs), "ns/op")
				b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(p95.Microseconds())/1000, "p95-ms")
				b.ReportMetric(float64(rcpu.Microseconds())/1000, "renderer-cpu-ms/op")
				b.ReportMetric(float64(ucpu.Microseconds())/1000, "ui-cpu-ms/op")
				b.ReportMetric(float64(pg.Microseconds())/1000, "pg-cpu-ms/op")
				b.ReportMetric(float64(size/runs)/1024, "KiB/op")
				b.Logf("%s at %d events (loaded in %v): p50 %v p95 %v; CPU per page: renderer %v, admin interface %v, PostgreSQL %v; %d KiB; load average %s",
					c.name, n, load.Round(time.Second), p50.Round(100*time.Microsecond), p95.Round(100*time.Microsecond), rcpu, ucpu, pg, size/runs/1024, loadAvg())
			})
		}
	})
}

// analystSession creates a person with the analyst role at identity (the
// admin key; removed when the benchmark ends) and signs them in through the
// admin interface at ui's sign-in form, as a browser does; the client
// carries the session cookie.
func analystSession(b *testing.B, ui, identity, adminKey string) *http.Client {
	b.Helper()
	user, password := testenv.Name("bench"), "analyst bench password 1"
	body, _ := json.Marshal(map[string]any{"username": user, "password": password, "roles": []string{"analyst"}})
	identityCall(b, http.MethodPost, identity+"/v1/users", adminKey, body, http.StatusCreated)
	b.Cleanup(func() {
		identityCall(b, http.MethodDelete, identity+"/v1/users/"+user, adminKey, nil, http.StatusNoContent)
	})
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	resp, err := hc.Get(ui + "/login")
	if err != nil {
		b.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		b.Fatalf("no CSRF field in the sign-in page:\n%.500s", page)
	}
	// The sign-in answers 303 to /, which the client follows: the home
	// page's first (cold) request, left out of the figures.
	resp, err = hc.PostForm(ui+"/login", url.Values{"csrf": {string(m[1])}, "username": {user}, "password": {password}, "next": {"/"}})
	if err != nil {
		b.Fatal(err)
	}
	home, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		b.Fatalf("sign-in of %s: %d at %s:\n%.500s", user, resp.StatusCode, resp.Request.URL, home)
	}
	return hc
}

// identityCall makes one call to identity's users API with the admin key
// and fails unless it answers want.
func identityCall(b *testing.B, method, u, adminKey string, body []byte, want int) {
	b.Helper()
	req, _ := http.NewRequest(method, u, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Errorf("%s %s = %d %s, want %d", method, u, resp.StatusCode, msg, want)
	}
}

// processCPU is a service's CPU time so far, from its /metrics
// (process_cpu_seconds_total: user and system, in clock ticks).
func processCPU(b *testing.B, base string) time.Duration {
	b.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("%s/metrics: process_cpu_seconds_total %q", base, v)
			}
			return time.Duration(s * float64(time.Second))
		}
	}
	b.Fatalf("%s/metrics has no process_cpu_seconds_total", base)
	return 0
}

// loadAvg is the machine's 1, 5 and 15 minute load averages: the box is
// shared, and a figure means little without them.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
