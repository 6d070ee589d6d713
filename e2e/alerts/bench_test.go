package alerts

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/alerts/rsyslogtest"
	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// cpuSeconds is the user+system CPU time of the local stack's alerts
// process (from /proc; clock ticks of 1/100 s).
func cpuSeconds(b *testing.B) float64 {
	b.Helper()
	pid, err := os.ReadFile(filepath.Join(testenv.Root(b), ".run", "pid", "alerts.pid"))
	if err != nil {
		b.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// BenchmarkForwarding sends b.N events through the collector, a third with
// a threat, in batches of 100, to a syslog TLS forwarder (real rsyslogd)
// and an OCSF HTTP one, and reports the alerts process's CPU per forwarded
// event (both destinations) and the largest lag seen in the forwarder's
// status while the load ran.
//
//	go test -run '^$' -bench Forwarding -benchtime 30000x ./alerts/
func BenchmarkForwarding(b *testing.B) {
	env := e2etest.MustEnv(b)
	app := e2etest.NewApp(b, env, "bench")
	rs := rsyslogtest.Start(b, true)
	dst := &ndjson{}
	srv := httptest.NewServer(dst)
	defer srv.Close()
	syslogID := create(b, env, "/v1/forwarders", map[string]any{"name": "bench rsyslog", "type": "syslog", "url": "tls://" + rs.Addr,
		"format": "cef", "app_ids": []string{app.ID}, "ca_pem": rs.CAPEM})
	create(b, env, "/v1/forwarders", map[string]any{"name": "bench ocsf", "type": "http", "url": srv.URL, "format": "ocsf", "app_ids": []string{app.ID}})
	var threats [][]any
	want := 0
	for i := 0; i < b.N; i++ {
		if i%3 == 0 {
			threats = append(threats, []any{"hooking"})
			want++
		} else {
			threats = append(threats, []any{})
		}
	}
	cpu0 := cpuSeconds(b)
	start := time.Now()
	maxLag := 0.0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			r, err := e2etest.TryDo(http.MethodGet, testenv.MustEnv(b, "THREATVIEW_ALERTS_URL")+"/v1/forwarders/"+syslogID+"/status", env.AdminKey, nil, nil)
			var st struct {
				Lag float64 `json:"lag_seconds"`
			}
			if err == nil && json.Unmarshal(r.Body, &st) == nil && st.Lag > maxLag {
				maxLag = st.Lag
			}
		}
	}()
	b.ResetTimer()
	send(b, env, app, threats)
	err := e2etest.WaitFor(5*time.Minute, func() (bool, error) {
		ids, _ := rs.Received(b)
		return len(ids) >= want, nil
	})
	b.StopTimer()
	close(stop)
	<-done
	if err != nil {
		ids, _ := rs.Received(b)
		b.Fatalf("rsyslog has %d of %d events after 5 min", len(ids), want)
	}
	cpu := cpuSeconds(b) - cpu0
	b.ReportMetric(cpu*1e6/float64(want), "cpu-us/threat-event")
	b.ReportMetric(maxLag, "max-lag-s")
	b.ReportMetric(float64(want)/time.Since(start).Seconds(), "threat-events/s")
}
