package alerts

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/alerts/rsyslogtest"
	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// sweepRun is what the load test's run.json says of one plan.
type sweepRun struct {
	Plan struct {
		Samples int
		Failed  int
		P95     time.Duration
		Median  time.Duration
		Span    time.Duration
	} `json:"plan_summary"`
	Codes     string `json:"codes"`
	Resources []struct {
		Name       string
		CPUSeconds float64
	} `json:"resources"`
}

// cpuOf is a process tree's CPU seconds during the plan.
func (r sweepRun) cpuOf(name string) float64 {
	for _, u := range r.Resources {
		if u.Name == name {
			return u.CPUSeconds
		}
	}
	return 0
}

// loadRun runs the load test's `run` (vegeta, open model, the simulator's
// fleet: about a third of events carry a threat) against the local collector
// and returns its run.json.
func loadRun(b *testing.B, root, lt, out string, rate float64, warmup, dur time.Duration) sweepRun {
	b.Helper()
	cmd := exec.Command(lt, "run", "-quiet", "-out", out, "-rate", fmt.Sprint(rate), "-warmup", warmup.String(),
		"-duration", dur.String(), "-pids", filepath.Join(root, ".run", "pid"))
	cmd.Dir = root
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("loadtest run: %v\n%s", err, o)
	}
	var r sweepRun
	raw, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil || json.Unmarshal(raw, &r) != nil {
		b.Fatalf("read run.json: %v", err)
	}
	return r
}

// stored is the processor's processor_events_stored_total.
func stored() float64 {
	resp, err := http.Get("http://127.0.0.1:8082/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "processor_events_stored_total "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// drained waits (at most 3 min) until the processor has stored what the
// broker held: its stored count unchanged over two polls 2 s apart.
func drained(b *testing.B) {
	b.Helper()
	prev, quiet := -2.0, 0
	for end := time.Now().Add(3 * time.Minute); time.Now().Before(end); time.Sleep(2 * time.Second) {
		cur := stored()
		if cur == prev {
			if quiet++; quiet >= 2 {
				return
			}
		} else {
			quiet = 0
		}
		prev = cur
	}
	b.Logf("the processor was still storing after 3 min (other traffic?)")
}

// loadavg is /proc/loadavg's 1-minute figure.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Fields(string(b) + " ?")[0]
}

// restoreOutbox puts back processor.env as it was and restarts the processor.
func restoreOutbox(b *testing.B, root string, orig []byte) {
	b.Helper()
	path := filepath.Join(root, ".run", "processor.env")
	if orig == nil {
		_ = os.Remove(path)
	} else if err := os.WriteFile(path, orig, 0o644); err != nil {
		b.Fatal(err)
	}
	testenv.Stack(b, "restart", "processor")
}

// BenchmarkIngestSweep measures the outbox's cost to ingest and the
// forwarding lag at a constant rate (SWEEP_RATE, default 2,000 req/s, one
// event a request, about a third with a threat) through the collector, with
// the load test's run: first with PROCESSOR_ALERTS_OUTBOX=false, then with
// the outbox on and every demo-app threat event forwarded to two
// destinations (syslog over TLS to a real rsyslogd, OCSF over HTTP). It
// reports the ingest p95 of both, the largest forwarding lag seen, and the
// alerts process's CPU per forwarded event. It restarts the processor, so
// it runs under the disruptive lock:
//
//	flock /tmp/threatview-disruptive.lock go test -run '^$' -bench IngestSweep -benchtime 1x -timeout 40m ./alerts/
func BenchmarkIngestSweep(b *testing.B) {
	env := e2etest.MustEnv(b)
	root := testenv.Root(b)
	rate, _ := strconv.ParseFloat(os.Getenv("SWEEP_RATE"), 64)
	if rate <= 0 {
		rate = 2000
	}
	dur, warm := 90*time.Second, 20*time.Second
	if d, err := time.ParseDuration(os.Getenv("SWEEP_DURATION")); err == nil && d > 0 {
		dur = d
	}
	out := os.Getenv("SWEEP_OUT")
	if out == "" {
		out = filepath.Join(root, ".run", "alerts-sweep")
	}
	lt := filepath.Join(b.TempDir(), "loadtest")
	build := exec.Command("go", "build", "-o", lt, "./loadtest/cmd/loadtest")
	build.Dir = root
	if o, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build loadtest: %v\n%s", err, o)
	}
	orig, _ := os.ReadFile(filepath.Join(root, ".run", "processor.env"))
	b.Cleanup(func() { restoreOutbox(b, root, orig) })

	// Off: the processor writes no outbox row.
	path := filepath.Join(root, ".run", "processor.env")
	if err := os.WriteFile(path, append(append([]byte(nil), orig...), "\nPROCESSOR_ALERTS_OUTBOX=false\n"...), 0o644); err != nil {
		b.Fatal(err)
	}
	testenv.Stack(b, "restart", "processor")
	drained(b)
	la0 := loadavg()
	off := loadRun(b, root, lt, filepath.Join(out, "off"), rate, warm, dur)
	laOff := loadavg()
	drained(b)

	// On, with two forwarders of every demo-app threat event.
	restoreOutbox(b, root, orig)
	rs := rsyslogtest.Start(b, true)
	dst := &ndjson{}
	srv := httptest.NewServer(dst)
	defer srv.Close()
	app := os.Getenv("THREATVIEW_DEMO_APP")
	if app == "" {
		app = "demo-app"
	}
	syslogID := create(b, env, "/v1/forwarders", map[string]any{"name": "sweep rsyslog", "type": "syslog", "url": "tls://" + rs.Addr,
		"format": "cef", "app_ids": []string{app}, "ca_pem": rs.CAPEM})
	httpID := create(b, env, "/v1/forwarders", map[string]any{"name": "sweep ocsf", "type": "http", "url": srv.URL, "format": "ocsf",
		"app_ids": []string{app}})
	type status struct {
		Delivered int64   `json:"delivered"`
		Pending   int64   `json:"pending"`
		Lag       float64 `json:"lag_seconds"`
	}
	statusOf := func(id string) (status, error) {
		var st status
		r, err := e2etest.TryDo(http.MethodGet, testenv.MustEnv(b, "THREATVIEW_ALERTS_URL")+"/v1/forwarders/"+id+"/status", env.AdminKey, nil, nil)
		if err == nil {
			err = json.Unmarshal(r.Body, &st)
		}
		return st, err
	}
	maxLag := 0.0
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, id := range []string{syslogID, httpID} {
				if st, err := statusOf(id); err == nil && st.Lag > maxLag {
					maxLag = st.Lag
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	cpu0 := cpuSeconds(b)
	s0, _ := statusOf(syslogID)
	h0, _ := statusOf(httpID)
	la1 := loadavg()
	on := loadRun(b, root, lt, filepath.Join(out, "on"), rate, warm, dur)
	laOn := loadavg()
	var s1, h1 status
	err := e2etest.WaitFor(10*time.Minute, func() (bool, error) {
		s1, _ = statusOf(syslogID)
		h1, _ = statusOf(httpID)
		return s1.Pending == 0 && h1.Pending == 0 && s1.Delivered > s0.Delivered, nil
	})
	stop()
	<-done
	if err != nil {
		b.Fatalf("the forwarders did not catch up within 10 min: %+v %+v", s1, h1)
	}
	cpu := cpuSeconds(b) - cpu0
	fwd := s1.Delivered - s0.Delivered
	if h := h1.Delivered - h0.Delivered; h != fwd {
		b.Errorf("rsyslog forwarder delivered %d, OCSF %d: want the same events", fwd, h)
	}
	b.ReportMetric(float64(off.Plan.P95)/1e6, "p95-ms-outbox-off")
	b.ReportMetric(float64(on.Plan.P95)/1e6, "p95-ms-outbox-on")
	b.ReportMetric(maxLag, "max-lag-s")
	b.ReportMetric(cpu*1e6/float64(fwd), "alerts-cpu-us/forwarded-event")
	b.ReportMetric(float64(fwd), "forwarded-events")
	perReq := func(r sweepRun, name string) float64 { return r.cpuOf(name) * 1e6 / float64(max(1, r.Plan.Samples)) }
	b.Logf("rate %.0f req/s for %s after %s warm-up; outbox off: %d samples, %d failed, codes %s, p50 %.2f ms, p95 %.2f ms, load average %s -> %s",
		rate, dur, warm, off.Plan.Samples, off.Plan.Failed, off.Codes, float64(off.Plan.Median)/1e6, float64(off.Plan.P95)/1e6, la0, laOff)
	b.Logf("outbox on, two forwarders: %d samples, %d failed, codes %s, p50 %.2f ms, p95 %.2f ms, load average %s -> %s",
		on.Plan.Samples, on.Plan.Failed, on.Codes, float64(on.Plan.Median)/1e6, float64(on.Plan.P95)/1e6, la1, laOn)
	b.Logf("forwarded %d threat events to each destination (largest lag %.1f s); alerts CPU %.1f s = %.0f us per event",
		fwd, maxLag, cpu, cpu*1e6/float64(fwd))
	for _, name := range []string{"collector", "processor", "postgres", "activemq", "alerts", "auditlogger", "auditworker", "mariadb", "loadtest (generator)"} {
		b.Logf("CPU per request during the plan, %-11s off %6.0f us, on %6.0f us", name, perReq(off, name), perReq(on, name))
	}
	if off.Plan.Failed > 0 || on.Plan.Failed > 0 {
		b.Errorf("failed requests: off %d, on %d", off.Plan.Failed, on.Plan.Failed)
	}
}
