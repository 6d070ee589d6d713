package forward_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/alerts/forward"
	"threatview/alerts/internal/pgtest"
	"threatview/alerts/rsyslogtest"
)

// TestSupervise_Outage follows a real outbox with two forwarders: syslog
// over TLS to a real rsyslogd (filtered to one app) and OCSF over HTTP to a
// destination that refuses every batch for a while. Every matching row
// arrives, none twice at rsyslogd, the HTTP one after its outage, and the
// failures show in the status.
func TestSupervise_Outage(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	rs := rsyslogtest.Start(t, true)
	dst := &ndjsonServer{refuse: 3}
	srv := httptest.NewServer(dst)
	defer srv.Close()
	ctx := context.Background()
	sys := alerts.Forwarder{ID: uuid.NewString(), Name: "rsyslog", Type: alerts.ForwardSyslog, URL: "tls://" + rs.Addr,
		Format: alerts.FormatCEF, AppIDs: []string{"app-a"}, CAPEM: rs.CAPEM, CreatedBy: "test"}
	web := alerts.Forwarder{ID: uuid.NewString(), Name: "ocsf", Type: alerts.ForwardHTTP, URL: srv.URL,
		Format: alerts.FormatOCSF, CreatedBy: "test"}
	pgtest.Insert(t, pool, 1, 0, 50, "app-a", time.Now(), "hooking") // before the forwarders: not sent
	for _, f := range []*alerts.Forwarder{&sys, &web} {
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateForwarder(ctx, f, nil); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cfg := testConfig(t)
		cfg.Batch, cfg.Poll, cfg.Refresh = 100, 50*time.Millisecond, 100*time.Millisecond
		_ = forward.Supervise(rctx, st, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); wg.Wait() }()
	for i := 0; i < 5; i++ {
		pgtest.Insert(t, pool, 2, i*100, 100, "app-a", time.Now(), "hooking")
		pgtest.Insert(t, pool, 3, i*100, 100, "app-b", time.Now(), "root")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ids, _ := rs.Received(t)
		lines := countLines(dst.all())
		if (len(ids) >= 500 && lines >= 1000) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	ids, _ := rs.Received(t)
	for i := 0; i < 500; i++ {
		if id := pgtest.ID(2, i); ids[id] != 1 {
			t.Fatalf("rsyslog received %s %d times, want 1 (got %d distinct)", id, ids[id], len(ids))
		}
	}
	if len(ids) != 500 {
		t.Fatalf("rsyslog received %d distinct events, want the 500 of app-a after the forwarder was made", len(ids))
	}
	uids := validateLines(t, mustSchema(t), dst.all())
	seen := map[string]int{}
	for _, u := range uids {
		seen[u]++
	}
	if len(seen) != 1000 {
		t.Fatalf("the HTTP destination has %d distinct events, want 1000", len(seen))
	}
	stat, err := st.ForwarderStatus(ctx, web.ID)
	if err != nil || stat.Failed != 3 || stat.Delivered < 1000 || stat.Pending != 0 {
		t.Fatalf("status of the HTTP forwarder = %+v, %v; want 3 failures, 1000 delivered, none pending", stat, err)
	}
}

// testConfig is a runner configuration whose sinks may reach the tests'
// loopback destinations.
func testConfig(t *testing.T) forward.Config {
	t.Helper()
	p, err := egress.ParsePolicy("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	return forward.Config{Version: "test", Host: "host1", Guard: egress.NewGuard(p)}
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}
