package threatview

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestSpool_EventsStayOnDisk: with a spool, queued events live on disk
// only: during a long outage the client's memory holds at most the batches
// its senders have in hand, not every queued event.
func TestSpool_EventsStayOnDisk(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		http.Error(w, `{"error":{"code":"unavailable","message":"down"}}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Token: "tok", SpoolDir: t.TempDir(), MaxBatchEvents: 500, FlushInterval: time.Hour, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.Close(ctx)
	}()

	const n, size = 20_000, 2048 // about 40 MiB of events
	pad := strings.Repeat("x", size)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for i := range n {
		ev := Event{Type: "app.startup", App: App{ID: "app-1"}, Attributes: map[string]any{"i": i, "pad": pad}}
		if err := c.Send(context.Background(), ev); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	grown := int64(heap()) - int64(before)

	c.mu.Lock()
	held := 0
	for _, b := range c.ready {
		held += len(b.items)
	}
	if c.cur != nil {
		held += len(c.cur.items)
	}
	c.mu.Unlock()
	if held != 0 {
		t.Errorf("queued batches hold %d events in memory, want 0 (on disk only)", held)
	}
	if s := c.Stats(); s.Pending != n || s.SpoolBytes < n*size {
		t.Errorf("Stats = %+v, want %d pending and at least %d spool bytes", s, n, n*size)
	}
	// One batch in a sender's hand is at most MaxBatchBytes (about 1 MiB).
	if grown > 8<<20 {
		t.Errorf("heap grew by %d MiB while %d MiB of events were spooled, want under 8 MiB", grown>>20, n*size>>20)
	}
}
