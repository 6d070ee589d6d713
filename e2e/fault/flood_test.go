//go:build fault

package fault

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// flood posts gzip batches of events as fast as a few senders can, the way
// a busy fleet does while something behind the broker is down.
type flood struct {
	url, token, app string
	batch           int // events a request
	pad             int // bytes of padding per event (about 500 B an event with the rest)
	client          *http.Client
	newID           func() string // event ids; nil: e2etest.UUID (random, version 4)

	mu       sync.Mutex
	ids      []string        // every id answered with 202
	statuses map[int]int     // answers by status (0: no answer)
	samples  []string        // the first non-202 answers
	lat      []time.Duration // latency of each answer
	bytes    atomic.Int64    // uncompressed body bytes answered 202
}

func newFlood(env e2etest.Env, app e2etest.App, batch int) *flood {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &flood{
		url: env.CollectorURL + "/v1/events", token: app.Token, app: app.ID, batch: batch, pad: 260,
		// Longer than the collector's publish timeout: a hang shows as a
		// transport error, not as a test stuck.
		client:   &http.Client{Transport: tr, Timeout: 30 * time.Second},
		statuses: map[int]int{},
	}
}

// body returns a gzip body of f.batch events with fresh ids, and its
// uncompressed size.
func (f *flood) body(seq int64) ([]byte, []string, int, error) {
	var raw bytes.Buffer
	ids := make([]string, f.batch)
	raw.WriteString(`{"events":[`)
	pad := strings.Repeat("x", f.pad)
	for i := range ids {
		if ids[i] = e2etest.UUID(); f.newID != nil {
			ids[i] = f.newID()
		}
		if i > 0 {
			raw.WriteByte(',')
		}
		ev := map[string]any{
			"type":     "app.startup",
			"event_id": ids[i],
			"app":      map[string]string{"id": f.app, "version": "1.0.0"},
			"device": map[string]string{
				"id": "flood-" + strconv.FormatInt(seq%97, 10), "model": "Pixel 8", "manufacturer": "Google", "os": "android", "os_version": "14",
			},
			"threats":    []string{"root"},
			"attributes": map[string]any{"seq": seq, "pad": pad},
		}
		b, err := json.Marshal(ev)
		if err != nil {
			return nil, nil, 0, err
		}
		raw.Write(b)
	}
	raw.WriteString(`]}`)
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, nil, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, nil, 0, err
	}
	return z.Bytes(), ids, raw.Len(), nil
}

// post sends one batch and records the answer. It reports whether it was 202.
func (f *flood) post(ctx context.Context, seq int64) bool {
	body, ids, n, err := f.body(seq)
	if err != nil {
		f.record(0, "build body: "+err.Error(), 0, nil, 0)
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		f.record(0, err.Error(), 0, nil, 0)
		return false
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		f.record(0, err.Error(), time.Since(start), nil, 0)
		return false
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lat := time.Since(start)
	if resp.StatusCode != http.StatusAccepted {
		detail := fmt.Sprintf("%d Retry-After=%q %s", resp.StatusCode, resp.Header.Get("Retry-After"), bytes.TrimSpace(rb))
		f.record(resp.StatusCode, detail, lat, nil, 0)
		return false
	}
	var a struct {
		IDs []string `json:"ids"`
	}
	if err := json.Unmarshal(rb, &a); err != nil || len(a.IDs) != len(ids) {
		f.record(-1, fmt.Sprintf("202 with %d ids for %d events: %v", len(a.IDs), len(ids), err), lat, nil, 0)
		return false
	}
	f.record(resp.StatusCode, "", lat, a.IDs, n)
	return true
}

func (f *flood) record(status int, detail string, lat time.Duration, ids []string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[status]++
	if lat > 0 {
		f.lat = append(f.lat, lat)
	}
	if detail != "" && len(f.samples) < 5 {
		f.samples = append(f.samples, detail)
	}
	f.ids = append(f.ids, ids...)
	f.bytes.Add(int64(n))
}

// run posts with senders goroutines until ctx ends, until untilBytes
// uncompressed bytes were accepted (0: no such limit), or, when stopOnFail,
// at the first answer that is not 202. It returns how long it ran. Reaching
// the limit or a failure stops new requests only: those in flight get their
// answers (and are recorded), so every event the broker kept was either
// answered 202 or refused with the answer recorded.
func (f *flood) run(ctx context.Context, senders int, untilBytes int64, stopOnFail bool) time.Duration {
	var seq atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && !stop.Load() {
				if untilBytes > 0 && f.bytes.Load() >= untilBytes {
					stop.Store(true)
					return
				}
				if !f.post(ctx, seq.Add(1)) && stopOnFail && ctx.Err() == nil {
					stop.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// paced posts with senders goroutines, each waiting every between its
// requests, until ctx ends.
func (f *flood) paced(ctx context.Context, senders int, every time.Duration) {
	var seq atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for ctx.Err() == nil {
				f.post(ctx, seq.Add(1))
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}()
	}
	wg.Wait()
}

// p95 returns the 95th percentile of the answers' latency.
func (f *flood) p95() time.Duration {
	f.mu.Lock()
	l := append([]time.Duration(nil), f.lat...)
	f.mu.Unlock()
	if len(l) == 0 {
		return 0
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[len(l)*95/100]
}

// summary returns the ids answered 202, the answers by status and the first
// failures.
func (f *flood) summary() ([]string, map[int]int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := map[int]int{}
	for k, v := range f.statuses {
		st[k] = v
	}
	return append([]string(nil), f.ids...), st, append([]string(nil), f.samples...)
}

// brokerRSS returns the broker's resident set in bytes, read from /proc.
func brokerRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Root(t), ".run", "pid", "activemq.pid"))
	if err != nil {
		t.Logf("broker pid: %v", err)
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pidRSS(pid)
}

// brokerLogSince returns what the broker logged after offset (the log's
// size when the test started).
func brokerLogSince(t *testing.T, offset int64) string {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.Root(t), ".run", "log", "activemq.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<20))
	return string(b)
}

func brokerLogSize(t *testing.T) int64 {
	fi, err := os.Stat(filepath.Join(testenv.Root(t), ".run", "log", "activemq.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

func mb(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }
