package privacy_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/retention/internal/retentiontest"
	"threatview/retention/privacy"
)

// fill stores n events of two apps and `devices` devices each, received
// over the last three months (three monthly partitions), with their facts,
// and the rollups and summaries the processor would have folded from them.
// The events are generated here and loaded with COPY, as a bulk load of
// real traffic would be; the facts and rollups are derived from them in
// the database.
func fill(tb testing.TB, db *sql.DB, n, devices int) {
	tb.Helper()
	ctx := context.Background()
	start := retentiontest.Month(-2)
	if _, err := db.ExecContext(ctx, `INSERT INTO facts.device_models_dim (manufacturer, model) SELECT 'M', 'model ' || g FROM generate_series(0, 4) g`); err != nil {
		tb.Fatalf("fill: %v", err)
	}
	copyEvents(tb, db, n, devices, start)
	stmts := []string{
		`INSERT INTO facts.facts (event_id, received_at, occurred_at, app_id, country, device_model_id, os, threats)
		SELECT e.id, e.received_at, e.occurred_at, e.app_id, e.country, d.id, e.os, facts.threat_types(e.payload)
		  FROM events.events e JOIN facts.device_models_dim d ON d.manufacturer = e.manufacturer AND d.model = e.device_model`,
	}
	grains := map[string]string{
		"hour":  "date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
		"day":   "(occurred_at AT TIME ZONE 'UTC')::date",
		"month": "date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date",
	}
	keys := map[string][3]string{"country": {"country", "country", "facts.facts"}, "device_model": {"device_model_id", "device_model_id", "facts.facts"},
		"os": {"os", "os", "facts.facts"}, "threat": {"threat", "x.threat", "facts.facts s, unnest(s.threats) AS x(threat)"}}
	for g, bucket := range grains {
		for k, c := range keys {
			stmts = append(stmts,
				fmt.Sprintf(`INSERT INTO facts.events_by_%s_per_%s (app_id, bucket, %s, count) SELECT app_id, %s, %s, count(*) FROM %s GROUP BY 1, 2, 3`, k, g, c[0], bucket, c[1], c[2]),
				fmt.Sprintf(`INSERT INTO facts.all_apps_events_by_%s_per_%s (bucket, %s, count) SELECT %s, %s, count(*) FROM %s GROUP BY 1, 2`, k, g, c[0], bucket, c[1], c[2]))
		}
	}
	stmts = append(stmts, `ANALYZE`)
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			tb.Fatalf("fill: %v\n%s", err, q)
		}
	}
}

// copyEvents loads n events with COPY: event g of app-(g%2), device
// d-((g/2)%devices), received evenly over 85 days from start, occurred up
// to 49 hours before, a third of them with one threat and the rest two.
func copyEvents(tb testing.TB, db *sql.DB, n, devices int, start time.Time) {
	tb.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	countries := []string{"AU", "FR", "US", "DE"}
	step := 85 * 24 * time.Hour / time.Duration(n)
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		g := 0
		_, err := pc.CopyFrom(ctx, pgx.Identifier{"events", "events"},
			[]string{"id", "received_at", "occurred_at", "type", "app_id", "device_id", "device_model", "manufacturer", "os", "country", "payload"},
			pgx.CopyFromFunc(func() ([]any, error) {
				if g == n {
					return nil, nil
				}
				g++
				r := start.Add(time.Duration(g) * step)
				payload := `{"threats": ["root", {"type": "hook"}]}`
				if g%3 == 0 {
					payload = `{"threats": ["root"]}`
				}
				return []any{pgtype.UUID{Bytes: uuid.New(), Valid: true}, r, r.Add(-time.Duration(g%50) * time.Hour), "app.startup",
					"app-" + strconv.Itoa(g%2), "d-" + strconv.Itoa((g/2)%devices), "model " + strconv.Itoa(g%5), "M",
					"os" + strconv.Itoa(g%3), countries[g%4], payload}, nil
			}))
		return err
	})
	if err != nil {
		tb.Fatalf("copy events: %v", err)
	}
}

// exact returns how many rollup buckets differ from a count(*) over the
// stored facts (per app, and over all apps with a key's rows summed over the
// shards, a sum of zero being no bucket).
func exact(tb testing.TB, pool *pgxpool.Pool) int {
	tb.Helper()
	grains := map[string]string{
		"hour":  "date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
		"day":   "(occurred_at AT TIME ZONE 'UTC')::date",
		"month": "date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date",
	}
	keys := map[string][3]string{"country": {"country", "country", "events.events e"}, "os": {"os", "os", "events.events e"},
		"threat": {"threat", "x.threat", "events.events e, unnest(facts.threat_types(e.payload)) AS x(threat)"}}
	bad := 0
	for g, bucket := range grains {
		for k, c := range keys {
			var n int
			q := fmt.Sprintf(`WITH want AS (SELECT app_id, %[1]s AS bucket, %[2]s::text AS key, count(*) AS n FROM %[3]s GROUP BY 1, 2, 3),
have AS (SELECT app_id, bucket, %[4]s::text AS key, count AS n FROM facts.events_by_%[5]s_per_%[6]s),
wall AS (SELECT bucket, key, sum(n) AS n FROM want GROUP BY 1, 2),
hall AS (SELECT bucket, %[4]s::text AS key, sum(count) AS n FROM facts.all_apps_events_by_%[5]s_per_%[6]s GROUP BY 1, 2 HAVING sum(count) <> 0)
SELECT (SELECT count(*) FROM want FULL JOIN have USING (app_id, bucket, key) WHERE want.n IS DISTINCT FROM have.n)
     + (SELECT count(*) FROM wall FULL JOIN hall USING (bucket, key) WHERE wall.n IS DISTINCT FROM hall.n)`, bucket, c[1], c[2], c[0], k, g)
			if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
				tb.Fatalf("%s per %s: %v", k, g, err)
			}
			bad += n
		}
	}
	return bad
}

func open(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func eraseAll(tb testing.TB, pg *privacy.PG, s privacy.Subject, batch int) privacy.Batch {
	tb.Helper()
	var sum privacy.Batch
	for {
		b, err := pg.EraseEvents(context.Background(), s, batch)
		if err != nil {
			tb.Fatalf("EraseEvents(%v) = %v", s, err)
		}
		if b.Events == 0 {
			return sum
		}
		if b.Facts != b.Events {
			tb.Fatalf("batch deleted %d events, %d facts", b.Events, b.Facts)
		}
		sum.Events += b.Events
		sum.Facts += b.Facts
		sum.RollupRows += b.RollupRows
		sum.RollupRowsRemoved += b.RollupRowsRemoved
	}
}

// TestPG_EraseEvents erases a device's events with the summaries over all
// apps (a row per shard, migration events 000024) counted by shard 0 alone
// (the erasure's own row), by shard 1 alone (the decrement makes shard 0's
// rows negative), and split between the two (a decrement of every row of a
// key, not only shard 0's, subtracts twice). The sums stay exact.
func TestPG_EraseEvents(t *testing.T) {
	for _, c := range []struct{ name, fixture string }{
		{"shard-0", ""},
		{"shard-1", `UPDATE %[1]s SET shard = 1`},
		{"split", `INSERT INTO %[1]s SELECT * FROM (SELECT bucket, %[2]s, count / 2, 1 FROM %[1]s WHERE count >= 2) x;
			UPDATE %[1]s SET count = count - count / 2 WHERE shard = 0 AND count >= 2`},
	} {
		t.Run(c.name, func(t *testing.T) { testEraseEvents(t, c.name, c.fixture) })
	}
}

func testEraseEvents(t *testing.T, name, fixture string) {
	url, db := retentiontest.Postgres(t)
	fill(t, db, 20000, 40)
	pool := open(t, url)
	ctx := context.Background()
	if fixture != "" {
		for k, col := range map[string]string{"country": "country", "device_model": "device_model_id", "os": "os", "threat": "threat"} {
			for _, g := range []string{"hour", "day", "month"} {
				// sql: test fixture; table and column names from the fixed lists above.
				if _, err := pool.Exec(ctx, fmt.Sprintf(fixture, "facts.all_apps_events_by_"+k+"_per_"+g, col)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if bad := exact(t, pool); bad != 0 {
		t.Fatalf("before: %d rollup buckets differ from count(*): the fixture is wrong", bad)
	}
	pg := privacy.NewPG(pool)
	count := func(app, dev string) (n int64) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2`, app, dev).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	victim := privacy.Subject{AppID: "app-0", DeviceID: "d-7"}
	want, other := count("app-0", "d-7"), count("app-1", "d-7")
	if want == 0 || other == 0 {
		t.Fatalf("fixture: %d and %d events of d-7", want, other)
	}
	sum := eraseAll(t, pg, victim, 37) // several batches
	if sum.Events != want || sum.Facts != want || sum.RollupRows == 0 {
		t.Fatalf("erased %+v, want %d events and facts", sum, want)
	}
	if got := count("app-0", "d-7"); got != 0 {
		t.Errorf("%d events of the subject left", got)
	}
	if got := count("app-1", "d-7"); got != other {
		t.Errorf("same device id in another app: %d events, want %d", got, other)
	}
	if bad := exact(t, pool); bad != 0 {
		t.Errorf("after the erasure %d rollup buckets differ from count(*)", bad)
	}
	var negative int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM facts.all_apps_events_by_country_per_hour WHERE count < 0`).Scan(&negative); err != nil {
		t.Fatal(err)
	}
	if (name == "shard-1" && negative == 0) || (name == "shard-0" && negative != 0) {
		t.Errorf("%s: %d rows below zero over all apps, want some when shard 1 alone counted, none when shard 0 did", name, negative)
	}
	if again := eraseAll(t, pg, victim, 37); again.Events != 0 || again.RollupRows != 0 {
		t.Errorf("a second run erased %+v, want nothing", again)
	}
	v, err := pg.Verify(ctx, victim)
	if err != nil || v.Events != 0 || v.LateEvents != 0 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// machineBusy returns the machine's busy CPU seconds so far (/proc/stat:
// all time but idle and iowait): the erasure's work is done by Postgres,
// not by this process, so its cost is read machine-wide.
func machineBusy(tb testing.TB) float64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	var name string
	var v [8]float64
	if _, err := fmt.Sscan(string(b), &name, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]); err != nil {
		tb.Fatal(err)
	}
	busy := 0.0
	for i, x := range v {
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return busy / 100 // USER_HZ
}

var bench struct {
	once     sync.Once
	url      string
	devices  int
	next     int
	cleanups []func() // the benchmark's database outlives each b.N round; dropped by TestMain
}

// keepTB defers the cleanups registered through it to TestMain.
type keepTB struct{ testing.TB }

func (keepTB) Cleanup(f func()) { bench.cleanups = append(bench.cleanups, f) }

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(bench.cleanups) - 1; i >= 0; i-- {
		bench.cleanups[i]()
	}
	os.Exit(code)
}

// BenchmarkErase erases one device per op (op i erases device d-i of
// app-0) from a table of PRIVACY_BENCH_EVENTS events (default 200,000) of
// 2 apps x PRIVACY_BENCH_DEVICES devices (default 2,000), received over
// three monthly partitions, in batches of 5,000, rollups adjusted: run
// with -benchtime=1000x for 1,000 erasures (docs/privacy.md).
func BenchmarkErase(b *testing.B) {
	url := benchDB(b)
	pool := open(b, url)
	pg := privacy.NewPG(pool)
	var rows int64
	busy0 := machineBusy(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := privacy.Subject{AppID: "app-0", DeviceID: "d-" + strconv.Itoa(bench.next%bench.devices)}
		bench.next++
		rows += eraseAll(b, pg, s, 5000).Events
	}
	b.StopTimer()
	b.ReportMetric((machineBusy(b)-busy0)/float64(b.N)*1000, "machine-CPU-ms/op")
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
	b.ReportMetric(load1(b), "load1")
}

// benchDB returns the benchmarks' events database, filled on first use
// with PRIVACY_BENCH_EVENTS events (default 200,000) of 2 apps x
// PRIVACY_BENCH_DEVICES devices (default 2,000); it is dropped when the
// test binary ends.
func benchDB(b *testing.B) string {
	b.Helper()
	bench.once.Do(func() {
		n, _ := strconv.Atoi(os.Getenv("PRIVACY_BENCH_EVENTS"))
		if n == 0 {
			n = 200000
		}
		devices, _ := strconv.Atoi(os.Getenv("PRIVACY_BENCH_DEVICES"))
		if devices == 0 {
			devices = 2000
		}
		url, db := retentiontest.Postgres(keepTB{b})
		t0, busy0 := time.Now(), machineBusy(b)
		fill(b, db, n, devices)
		b.Logf("filled %d events, %d devices per app, in %s (machine CPU %.0f s, load %.2f)", n, devices,
			time.Since(t0).Round(time.Second), machineBusy(b)-busy0, load1(b))
		bench.url, bench.devices = url, devices
	})
	if bench.url == "" {
		b.Fatal("the benchmark database was not filled")
	}
	return bench.url
}

// BenchmarkEraseJobs queues b.N erasure requests at once (devices of app-0
// after those BenchmarkErase took, from the same table) and runs them with
// the runner, as the service does — claim, suppress, events, facts and
// rollups in batches, late events, the verification, the outcome recorded —
// without the settle time (PRIVACY_SETTLE, waited once per queue) and
// without audit or archive stores. Its ns/op is the
// time per request from the queue's start to the last one done.
func BenchmarkEraseJobs(b *testing.B) {
	url := benchDB(b)
	pool := open(b, url)
	pg := privacy.NewPG(pool)
	ctx := context.Background()
	b.StopTimer()
	ids := make([]string, b.N)
	for i := range ids {
		e := &privacy.Erasure{ID: uuid.Must(uuid.NewV7()).String(), AppID: "app-0",
			DeviceID: "d-" + strconv.Itoa(bench.next%bench.devices), Suppress: true, RequestedBy: "bench"}
		bench.next++
		if err := pg.Create(ctx, e); err != nil {
			b.Fatalf("store erasure %d: %v", i, err)
		}
		if err := pg.Queue(ctx, e); err != nil {
			b.Fatalf("queue erasure %d: %v", i, err)
		}
		ids[i] = e.ID
	}
	runner := privacy.NewRunner(pg, nil, privacy.RunnerConfig{BatchRows: 5000, Poll: 20 * time.Millisecond},
		privacy.NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	busy0 := machineBusy(b)
	b.StartTimer()
	go func() { defer close(done); _ = runner.Run(rctx, pool) }()
	var left int
	for {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events.erasures WHERE id = ANY($1::uuid[]) AND status IN ('queued', 'running')`, ids).Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	stop()
	<-done
	var failed, events int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'done' OR NOT (report->'verification'->>'clean')::boolean),
		coalesce(sum((report->>'events_deleted')::bigint), 0) FROM events.erasures WHERE id = ANY($1::uuid[])`, ids).Scan(&failed, &events); err != nil {
		b.Fatal(err)
	}
	if failed != 0 {
		b.Fatalf("%d of %d erasures not done and clean", failed, b.N)
	}
	b.ReportMetric((machineBusy(b)-busy0)/float64(b.N)*1000, "machine-CPU-ms/op")
	b.ReportMetric(float64(events)/float64(b.N), "rows/op")
	b.ReportMetric(load1(b), "load1")
}

// load1 is the machine's one-minute load average now.
func load1(tb testing.TB) float64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		tb.Fatal(err)
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		tb.Fatal(err)
	}
	return l
}
