package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"threatview/collector"
	"threatview/collector/httpapi"
	"threatview/collector/publish"
)

// fullBody returns a batch of 500 events whose JSON is just under the
// 1 MiB request limit, gzipped (it compresses to a few KiB).
func fullBody(t testing.TB) []byte {
	pad := strings.Repeat("x", (collector.MaxRequestBytes-64)/500-120)
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for i := range 500 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"app.startup","app":{"id":"app1"},"attributes":{"pad":"%s"}}`, pad)
	}
	b.WriteString(`]}`)
	if b.Len() > collector.MaxRequestBytes {
		t.Fatalf("body is %d bytes, over the limit", b.Len())
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte(b.String()))
	_ = zw.Close()
	return z.Bytes()
}

// TestAdmission_BoundsMemory sends many gzip bodies that expand to the
// 1 MiB limit at once, to a collector whose broker is slow, under a Go
// memory limit of 256 MiB: the default byte cap (from the memory limit)
// must answer the excess 503 with Retry-After, and the heap must stay under
// the limit. (Before the cap, every request decompressed its megabyte and
// held five or six times that until the broker answered: about 500 MiB.)
func TestAdmission_BoundsMemory(t *testing.T) {
	const memLimit = 256 << 20
	old := debug.SetMemoryLimit(memLimit)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	runtime.GC()

	gz := fullBody(t)
	release := make(chan struct{})
	h := httpapi.New(httpapi.Deps{
		Auth:     fakeAuth{},
		Enricher: collector.NewEnricher(fakeLocator{}, nil),
		Events: publish.New(publish.Options{Prefix: publish.EventsPrefix, Suffix: publish.Suffix, Concurrency: 2, Timeout: 30 * time.Second},
			func(ctx context.Context, _ []byte, _ int) error {
				select { // a slow broker: requests stay in flight
				case <-release:
				case <-time.After(100 * time.Millisecond):
				}
				return nil
			}),
		MaxInFlight: 4096,
		RetryAfter:  time.Second,
	})

	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})

	const clients = 96
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodPost, "/v1/events", bytes.NewReader(gz))
			req.Header.Set("Authorization", "Bearer "+goodToken)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Content-Encoding", "gzip")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			mu.Lock()
			statuses[w.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	close(release)
	close(stop)
	sampler.Wait()

	t.Logf("statuses %v, cap %d MiB, peak heap objects %d MiB (limit %d MiB)",
		statuses, httpapi.DefaultMaxBodyBytes()>>20, peak.Load()>>20, memLimit>>20)
	if statuses[http.StatusAccepted] == 0 || statuses[http.StatusServiceUnavailable] == 0 ||
		statuses[http.StatusAccepted]+statuses[http.StatusServiceUnavailable] != clients {
		t.Fatalf("statuses = %v, want only 202 and 503, some of each", statuses)
	}
	if p := peak.Load(); p > memLimit {
		t.Fatalf("peak heap %d MiB is over the memory limit of %d MiB", p>>20, memLimit>>20)
	}
}

// appsAuth binds each token to the app of the same name.
type appsAuth struct{}

func (appsAuth) Check(_ context.Context, token string) (collector.Identity, error) {
	return collector.Identity{TokenID: "t-" + token, AppID: token}, nil
}

// TestAdmission_AppShare checks that one app flooding the collector with
// large bodies leaves room for another app's: an app holds at most half
// the cap.
func TestAdmission_AppShare(t *testing.T) {
	gz := func(app string) []byte {
		pad := strings.Repeat("x", 2500) // 400 events: just under 1 MiB
		var b strings.Builder
		b.WriteString(`{"events":[`)
		for i := range 400 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"t","app":{"id":%q},"attributes":{"pad":"%s"}}`, app, pad)
		}
		b.WriteString(`]}`)
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write([]byte(b.String()))
		_ = zw.Close()
		return z.Bytes()
	}
	hold := make(chan struct{})
	h := httpapi.New(httpapi.Deps{
		Auth:     appsAuth{},
		Enricher: collector.NewEnricher(fakeLocator{}, nil),
		Events: publish.New(publish.Options{Prefix: publish.EventsPrefix, Suffix: publish.Suffix, Concurrency: 64, Timeout: 30 * time.Second},
			func(ctx context.Context, _ []byte, _ int) error {
				select { // the broker holds every message until released
				case <-hold:
				case <-ctx.Done():
				}
				return nil
			}),
		MaxInFlight:  4096,
		MaxBodyBytes: 8 << 20,
	})
	post := func(app string, body []byte) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+app)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	// The flood: requests of app "hostile" pile up behind the held broker
	// until its share is full; the rest are refused.
	flood := gz("hostile")
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 40 {
		wg.Go(func() {
			if post("hostile", flood) == http.StatusServiceUnavailable {
				refused.Add(1)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for refused.Load() < 40-4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := refused.Load(); got < 40-4 {
		t.Fatalf("hostile app: %d of 40 refused while its requests are held, want at least 36 (its share is 4 MiB)", got)
	}
	// Another app still gets in while the hostile app holds its share.
	done := make(chan int, 1)
	go func() { done <- post("good", gz("good")) }()
	time.Sleep(100 * time.Millisecond)
	close(hold)
	if code := <-done; code != http.StatusAccepted {
		t.Fatalf("good app during the flood: status %d, want 202", code)
	}
	wg.Wait()
}
