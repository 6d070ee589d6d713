package webui

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"threatview/admininterface/broker"
	"threatview/admininterface/upstream"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// withBroker points h's DLQ pages at the real broker, on dead-letter
// queues of the test's own, and returns a publisher and those two queues'
// targets (events, audit).
func withBroker(t *testing.T, h *harness) (*mq.Publisher, string, string) {
	t.Helper()
	if os.Getenv("STOMP_ADDR") == "" && !testenv.Required() {
		t.Skip("STOMP_ADDR not set")
	}
	cfg := testenv.MustBroker(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := mq.NewPublisher(cfg, log)
	t.Cleanup(func() { pub.Close() })
	h.srv.deps.Broker = broker.New(cfg, pub, log)
	events, audit := testenv.Queue("admin.events"), testenv.Queue("admin.audit")
	h.srv.dlqQueues = []dlqQueue{
		{Key: "events", Name: "DLQ.events", Dest: wire.DeadLetter(events), Target: "events", target: events},
		{Key: "audit", Name: "DLQ.audit", Dest: wire.DeadLetter(audit), Target: "audit", target: audit},
	}
	t.Cleanup(func() {
		for _, q := range []string{events, audit} {
			_, _ = h.srv.deps.Broker.Purge(context.Background(), q, 0)
			_, _ = h.srv.deps.Broker.Purge(context.Background(), wire.DeadLetter(q), 0)
		}
	})
	return pub, events, audit
}

func mustDeadLetter(t *testing.T, pub *mq.Publisher, queue string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := pub.Send(context.Background(), wire.DeadLetter(queue), []byte(`{}`), map[string]string{wire.HeaderDeadLetterReason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
}

func depth(t *testing.T, h *harness, queue string) int {
	t.Helper()
	msgs, _, err := h.srv.deps.Broker.Browse(context.Background(), queue, broker.BrowseLimit, false)
	if err != nil {
		t.Fatal(err)
	}
	return len(msgs)
}

// TestServer_DLQReplayAll: "Replay all" replayed at most what one browse
// shows (400 messages) while the page promised every one. It must replay
// the whole queue, show its progress, and audit the request and the count.
func TestServer_DLQReplayAll(t *testing.T) {
	h := newHarness(t)
	pub, events, _ := withBroker(t, h)
	const n = broker.BrowseLimit + 50
	mustDeadLetter(t, pub, events, n)
	b := h.browser(t)
	csrf := b.signIn("ada")
	resp, page := b.do("POST", "/dlq/events/replay", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "id": {""}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Done: 450 message(s) replayed.") {
		t.Fatalf("POST replay all = %d:\n%.2000s", resp.StatusCode, page)
	}
	if d := depth(t, h, wire.DeadLetter(events)); d != 0 {
		t.Errorf("the DLQ holds %d messages after replay all, want 0", d)
	}
	if moved, err := h.srv.deps.Broker.Purge(context.Background(), events, 0); err != nil || moved != n {
		t.Errorf("the target holds %d messages (%v), want %d", moved, err, n)
	}
	h.fake.mu.Lock()
	posted := h.fake.posted
	h.fake.mu.Unlock()
	if len(posted) != 2 || posted[0].Outcome != http.StatusAccepted || posted[1].Outcome != http.StatusOK || posted[1].EventCount != n ||
		posted[0].Action != ActionDLQReplay || posted[0].ActorToken != "ada" {
		t.Fatalf("audit records = %+v, want the request (202) then the result (200, %d messages)", posted, n)
	}
}

// TestServer_DLQAuditFirst: a dead-letter action that cannot be audited is
// not taken. Before, the message was deleted or replayed and the failed
// audit only logged.
func TestServer_DLQAuditFirst(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	release := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(stalled.Close)
	t.Cleanup(func() { close(release) })
	for _, tc := range []struct{ name, url string }{{"Down", down.URL}, {"Stalled", stalled.URL}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pub, events, _ := withBroker(t, h)
			mustDeadLetter(t, pub, events, 2)
			b := h.browser(t)
			csrf := b.signIn("ada")
			h.srv.deps.Audit = upstream.Audit{Client: upstream.New(tc.url, nil, 2*time.Second)}
			h.srv.auditWait = 500 * time.Millisecond
			dlq := wire.DeadLetter(events)
			msgs, _, err := h.srv.deps.Broker.Browse(context.Background(), dlq, 10, false)
			if err != nil || len(msgs) != 2 {
				t.Fatalf("Browse = %d, %v", len(msgs), err)
			}
			for _, try := range []struct{ path, id string }{
				{"/dlq/events/delete", msgs[0].ID}, {"/dlq/events/replay", msgs[0].ID}, {"/dlq/events/replay", ""},
			} {
				start := time.Now()
				resp, page := b.do("POST", try.path, url.Values{"csrf": {csrf}, "confirm": {"yes"}, "id": {try.id}})
				if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(page, "Nothing was done") {
					t.Errorf("POST %s id=%q with the audit logger %s = %d, want 503 saying nothing was done", try.path, try.id, tc.name, resp.StatusCode)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("POST %s took %s, want the refusal within the audit wait", try.path, d)
				}
				if d := depth(t, h, dlq); d != 2 {
					t.Fatalf("after POST %s id=%q the DLQ holds %d messages, want 2 (untouched)", try.path, try.id, d)
				}
				if d := depth(t, h, events); d != 0 {
					t.Fatalf("after POST %s id=%q the target holds %d messages, want 0", try.path, try.id, d)
				}
			}
		})
	}
}
