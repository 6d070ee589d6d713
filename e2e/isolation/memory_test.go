package isolation

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
)

// collectorMemoryRequest is the collector's memory request in the reference
// deployment (DESIGN.md): its RSS must stay under it whatever apps send.
const collectorMemoryRequest = 760 << 20

// TestIsolation_GzipFloodKeepsCollectorMemoryBounded sends many gzip bodies
// of a few KiB that each expand to the 1 MiB request limit, all at once, to
// the running collector, and samples its resident memory meanwhile: the cap
// on decompressed bytes in flight answers the excess 503 with Retry-After,
// and the RSS stays under the collector's memory request. (Measured: 98 MiB
// with the default cap of 16 MiB, 8 MiB for one app; without a cap, 838 MiB
// and the test fails.)
func TestIsolation_GzipFloodKeepsCollectorMemoryBounded(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "iso-flood")

	// 31 events of almost 32 KiB each: just under 1 MiB, 1.2 KiB gzipped.
	pad := strings.Repeat("x", 32<<10-200)
	events := make([]string, 31)
	for i := range events {
		events[i] = fmt.Sprintf(`{"type":"app.startup","app":{"id":%q},"attributes":{"pad":%q}}`, app.ID, pad)
	}
	raw := `{"events":[` + strings.Join(events, ",") + `]}`
	if len(raw) > 1<<20 {
		t.Fatalf("body is %d bytes, over 1 MiB", len(raw))
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte(raw))
	_ = zw.Close()
	gz := z.Bytes()

	before := rss(t, env)
	var peak atomic.Int64
	peak.Store(before)
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			if v := rss(t, env); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	const clients, rounds = 96, 2
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range rounds {
				r, err := e2etest.TryDo(http.MethodPost, env.CollectorURL+"/v1/events", app.Token, gz,
					map[string]string{"Content-Encoding": "gzip"})
				if err != nil {
					t.Errorf("POST: %v", err)
					return
				}
				if r.Status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") == "" {
					t.Errorf("503 without Retry-After")
				}
				mu.Lock()
				statuses[r.Status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	t.Logf("statuses %v; collector RSS %d MiB before, peak %d MiB (bound %d MiB)",
		statuses, before>>20, peak.Load()>>20, collectorMemoryRequest>>20)
	for s := range statuses {
		if s != http.StatusAccepted && s != http.StatusServiceUnavailable {
			t.Errorf("status %d: want only 202 and 503", s)
		}
	}
	if peak.Load() > collectorMemoryRequest {
		t.Fatalf("collector RSS peaked at %d MiB, over %d MiB", peak.Load()>>20, collectorMemoryRequest>>20)
	}
	e2etest.Healthy(t, env)
}

// rss reads the collector's process_resident_memory_bytes (0 if unread).
func rss(t *testing.T, env e2etest.Env) int64 {
	r, err := e2etest.TryDo(http.MethodGet, env.CollectorURL+"/metrics", "", nil, nil)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		var v float64
		if _, err := fmt.Sscanf(line, "process_resident_memory_bytes %g", &v); err == nil {
			return int64(v)
		}
	}
	t.Errorf("collector /metrics has no process_resident_memory_bytes")
	return 0
}
