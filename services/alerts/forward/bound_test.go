package forward_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/alerts"
	"threatview/alerts/forward"
	"threatview/alerts/internal/pgtest"
	"threatview/alerts/postgres"
	"threatview/platform/pipeline"
)

// supervise runs the runners with cfg until the test ends.
func supervise(t *testing.T, st *postgres.Store, cfg forward.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = forward.Supervise(ctx, st, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func mustForwarder(t *testing.T, st *postgres.Store, f *alerts.Forwarder) {
	t.Helper()
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateForwarder(context.Background(), f, nil); err != nil {
		t.Fatal(err)
	}
}

// waitStatus polls the forwarder's status until ok says it is done.
func waitStatus(t *testing.T, st *postgres.Store, id string, ok func(alerts.ForwarderStatus) bool) alerts.ForwarderStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := st.ForwarderStatus(context.Background(), id)
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("forwarder status = %+v, %v after 30 s", s, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRun_BacklogBound (issue 37 item 11): while a destination refuses
// everything, the forwarder's backlog stays at ALERTS_FORWARD_MAX_BACKLOG:
// the oldest rows are skipped, counted in its status and metric, and the
// rows kept are the newest, delivered once the destination is back.
func TestRun_BacklogBound(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	dst := &ndjsonServer{refuse: 1 << 30}
	srv := httptest.NewServer(dst)
	defer srv.Close()
	f := alerts.Forwarder{ID: uuid.NewString(), Name: "down", Type: alerts.ForwardHTTP, URL: srv.URL, Format: alerts.FormatOCSF, CreatedBy: "test"}
	mustForwarder(t, st, &f)
	pgtest.Insert(t, pool, 1, 0, 500, "app-a", time.Now(), "hooking")
	reg := prometheus.NewRegistry()
	cfg := testConfig(t)
	cfg.Batch, cfg.Poll, cfg.Refresh, cfg.MaxBacklog = 50, 20*time.Millisecond, 50*time.Millisecond, 100
	cfg.Backoff = pipeline.Backoff{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	cfg.Metrics = forward.NewMetrics(reg)
	supervise(t, st, cfg)
	s := waitStatus(t, st, f.ID, func(s alerts.ForwarderStatus) bool { return s.Skipped > 0 })
	if s.Skipped != 400 || s.Pending != 100 || s.Delivered != 0 {
		t.Fatalf("status after the bound = %+v, want 400 skipped, 100 pending, none delivered", s)
	}
	if got := testutil.ToFloat64(cfg.Metrics.Skipped.WithLabelValues(f.ID)); got != 400 {
		t.Fatalf("alerts_forward_skipped_total = %v, want 400", got)
	}
	dst.mu.Lock()
	dst.refuse = 0
	dst.mu.Unlock()
	s = waitStatus(t, st, f.ID, func(s alerts.ForwarderStatus) bool { return s.Pending == 0 })
	seen := map[string]bool{}
	for _, u := range validateLines(t, mustSchema(t), dst.all()) {
		seen[u] = true
	}
	if s.Skipped != 400 || len(seen) != 100 || !seen[pgtest.ID(1, 499)] || seen[pgtest.ID(1, 399)] {
		t.Fatalf("after recovery: status %+v, %d distinct events delivered; want the newest 100 (400 to 499)", s, len(seen))
	}
}

// TestRun_SinkRestarted (issue 37 item 11): a forwarder whose sink failed
// to start is started again with backoff (it stopped for good before), and
// its backlog is bounded meanwhile.
func TestRun_SinkRestarted(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	dst := &ndjsonServer{}
	srv := httptest.NewServer(dst)
	defer srv.Close()
	f := alerts.Forwarder{ID: uuid.NewString(), Name: "flaky start", Type: alerts.ForwardHTTP, URL: srv.URL, Format: alerts.FormatOCSF, CreatedBy: "test"}
	mustForwarder(t, st, &f)
	pgtest.Insert(t, pool, 2, 0, 30, "app-a", time.Now(), "hooking")
	cfg := testConfig(t)
	cfg.Batch, cfg.Poll, cfg.Refresh, cfg.MaxBacklog = 50, 20*time.Millisecond, 50*time.Millisecond, 10
	cfg.Backoff = pipeline.Backoff{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	var starts atomic.Int32
	cfg.Sink = func(f *alerts.Forwarder, c forward.Config) (alerts.Sink, error) {
		if starts.Add(1) <= 3 {
			return nil, errors.New("sink not ready")
		}
		return forward.NewSink(f, c)
	}
	supervise(t, st, cfg)
	s := waitStatus(t, st, f.ID, func(s alerts.ForwarderStatus) bool { return s.Delivered > 0 })
	if s.Failed < 3 || s.Skipped != 20 || s.Delivered != 10 || starts.Load() != 4 {
		t.Fatalf("status %+v after %d starts; want 3 failed starts, 20 skipped, the newest 10 delivered by the 4th", s, starts.Load())
	}
}

// TestHTTP_SecretHeader (issue 37 item 5): an HTTP forwarder sends its
// write-only secret header, and neither a failed batch's error nor the
// last_error stored from it names the URL's path or query.
func TestHTTP_SecretHeader(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	f := alerts.Forwarder{ID: "f1", Type: alerts.ForwardHTTP, URL: srv.URL + "/collector?token=QUERYTOKEN", Format: alerts.FormatOCSF,
		SecretHeader: &alerts.SecretHeader{Name: "Authorization", Value: "Splunk HEADERSECRET"}}
	sink, err := forward.NewSink(&f, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Send(context.Background(), []alerts.Event{event(1, "hooking")}); err != nil {
		t.Fatal(err)
	}
	if got.Load() != "Splunk HEADERSECRET" {
		t.Fatalf("the destination got Authorization %q, want the secret header", got.Load())
	}
	srv.Close()
	err = sink.Send(context.Background(), []alerts.Event{event(2, "hooking")})
	if err == nil || strings.Contains(err.Error(), "QUERYTOKEN") || strings.Contains(err.Error(), "/collector") {
		t.Fatalf("Send to a closed destination = %v, want an error without the URL", err)
	}
	_, st, _ := pgtest.MustStore(t)
	fw := alerts.Forwarder{ID: uuid.NewString(), Name: "x", Type: alerts.ForwardHTTP, URL: "https://siem.example/x", Format: alerts.FormatOCSF, CreatedBy: "t"}
	mustForwarder(t, st, &fw)
	if err := st.Failed(context.Background(), fw.ID, `Post "https://siem.example:8088/services/collector?token=QUERYTOKEN": EOF`); err != nil {
		t.Fatal(err)
	}
	s, _ := st.ForwarderStatus(context.Background(), fw.ID)
	if s.LastError != `Post "https://siem.example:8088": EOF` {
		t.Fatalf("last_error = %q, want the URL cut to scheme and host", s.LastError)
	}
}
