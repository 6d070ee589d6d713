package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"threatview/collector"
	"threatview/loadtest/sim"
)

func TestCheckTarget(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080", true},
		{"http://127.0.0.2:9000/", true},
		{"http://localhost:8080", false},
		{"http://10.0.0.1:8080", false},
		{"http://[::1]:8080", false},
		{"https://127.0.0.1:8080", false},
		{"http://example.com", false},
		{"127.0.0.1:8080", false},
	}
	for _, tt := range tests {
		_, err := CheckTarget(tt.url)
		if (err == nil) != tt.ok {
			t.Errorf("CheckTarget(%q) = %v, want ok=%v", tt.url, err, tt.ok)
		}
		if err != nil && tt.ok == false && strings.HasPrefix(tt.url, "http://") && !errors.Is(err, ErrNotLoopback) {
			t.Errorf("CheckTarget(%q) = %v, want ErrNotLoopback", tt.url, err)
		}
	}
}

// fakeCollector decodes with the collector's own decoder and answers like
// it: 202 with ids, or 422. Every third request it fails with 503 when
// flaky is set.
type fakeCollector struct {
	n      atomic.Int64
	flaky  bool
	mu     sync.Mutex
	xff    map[string]int
	tokens map[string]int
	issued []string
}

func (f *fakeCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.n.Add(1)
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.xff[r.Header.Get("X-Forwarded-For")]++
	f.tokens[r.Header.Get("Authorization")]++
	f.mu.Unlock()
	if r.URL.Path != "/v1/events" || r.Method != http.MethodPost {
		http.Error(w, "no", http.StatusNotFound)
		return
	}
	if f.flaky && n%3 == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	ins, err := collector.Decode(body)
	if err != nil {
		w.WriteHeader(http.StatusUnprocessableEntity)
		return
	}
	ids := make([]string, len(ins))
	for i := range ins {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", n*1000+int64(i))
	}
	f.mu.Lock()
	f.issued = append(f.issued, ids...)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"accepted":%d,"ids":["%s"]}`, len(ids), strings.Join(ids, `","`))
}

func newFake(t *testing.T, flaky bool) (*fakeCollector, Target) {
	f := &fakeCollector{flaky: flaky, xff: map[string]int{}, tokens: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, Target{URL: srv.URL, Token: "tok", ForwardedFor: true}
}

func newGen(t *testing.T, batch int) *sim.Generator {
	g, err := sim.New(sim.Config{AppID: "demo-app", Seed: 5, BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestOpen(t *testing.T) {
	f, tgt := newFake(t, true)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	res, err := Open(context.Background(), tgt, newGen(t, 1), "plan", 200, 500*time.Millisecond, FileSink(w), nil)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	w.Flush()
	sent := int(f.n.Load())
	if len(res.Samples) != sent || sent == 0 {
		t.Fatalf("%d samples, server saw %d requests", len(res.Samples), sent)
	}
	if res.Codes[202]+res.Codes[503] != sent || res.Codes[503] != sent/3 {
		t.Errorf("codes = %v for %d requests, want every third 503", res.Codes, sent)
	}
	s := res.Summary()
	if s.Failed != res.Codes[503] {
		t.Errorf("summary failed = %d, want %d", s.Failed, res.Codes[503])
	}
	ids := strings.Fields(buf.String())
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ids) != len(f.issued) || res.EventsOK != len(f.issued) || res.Accepted != res.Codes[202] {
		t.Errorf("recorded %d ids (EventsOK %d), server issued %d", len(ids), res.EventsOK, len(f.issued))
	}
	if f.tokens["Bearer tok"] != sent {
		t.Errorf("authorization headers = %v", f.tokens)
	}
	if len(f.xff) < 5 || f.xff[""] > 0 {
		t.Errorf("X-Forwarded-For spread over %d addresses (%v), want many and never empty", len(f.xff), f.xff[""])
	}
}

func TestClosed_Count(t *testing.T) {
	f, tgt := newFake(t, false)
	var ids []string
	sink := func(x []string) error { ids = append(ids, x...); return nil }
	res, err := Closed(context.Background(), tgt, newGen(t, 10), "bulk", 8, time.Minute, 120, sink, nil)
	if err != nil {
		t.Fatalf("Closed = %v", err)
	}
	if got := int(f.n.Load()); got != 120 || len(res.Samples) != 120 {
		t.Errorf("server saw %d requests, %d samples; want exactly 120", got, len(res.Samples))
	}
	if res.EventsOK != 1200 || len(ids) != 1200 {
		t.Errorf("EventsOK = %d, ids = %d, want 1200 (120 requests × 10)", res.EventsOK, len(ids))
	}
}

func TestClosed_Duration(t *testing.T) {
	f, tgt := newFake(t, false)
	res, err := Closed(context.Background(), tgt, newGen(t, 1), "users", 4, 200*time.Millisecond, 0, nil, io.Discard)
	if err != nil {
		t.Fatalf("Closed = %v", err)
	}
	if len(res.Samples) == 0 || int(f.n.Load()) < len(res.Samples) {
		t.Errorf("%d samples for %d requests", len(res.Samples), f.n.Load())
	}
	if res.Summary().Failed != 0 {
		t.Errorf("failures against a healthy server: %+v", res.Codes)
	}
}

func TestLoads_RefuseOtherHosts(t *testing.T) {
	tgt := Target{URL: "http://192.0.2.1:8080", Token: "t"}
	if _, err := Open(context.Background(), tgt, newGen(t, 1), "x", 10, time.Second, nil, nil); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("Open(non-loopback) = %v, want ErrNotLoopback", err)
	}
	if _, err := Closed(context.Background(), tgt, newGen(t, 1), "x", 1, time.Second, 1, nil, nil); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("Closed(non-loopback) = %v, want ErrNotLoopback", err)
	}
}

func TestLoads_Bounds(t *testing.T) {
	_, tgt := newFake(t, false)
	g := newGen(t, 1)
	if _, err := Open(context.Background(), tgt, g, "x", MaxRate+1, time.Second, nil, nil); err == nil {
		t.Error("Open accepted a rate over MaxRate")
	}
	if _, err := Open(context.Background(), tgt, g, "x", 10, MaxDuration+time.Second, nil, nil); err == nil {
		t.Error("Open accepted a duration over MaxDuration")
	}
	if _, err := Closed(context.Background(), tgt, g, "x", MaxUsers+1, time.Second, 0, nil, nil); err == nil {
		t.Error("Closed accepted more than MaxUsers")
	}
	if _, err := Closed(context.Background(), tgt, g, "x", 1, time.Second, MaxCount+1, nil, nil); err == nil {
		t.Error("Closed accepted a count over MaxCount")
	}
}

func TestOpen_Pregenerated(t *testing.T) {
	f := &fakeCollector{xff: map[string]int{}, tokens: map[string]int{}}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[string(b)]++
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tgt := Target{URL: srv.URL, Token: "tok", ForwardedFor: true}

	pre, err := PregenerateFor(newGen(t, 1), 200, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, r := range pre.reqs {
		want[string(r.Body)] = true
	}
	if len(pre.reqs) < 100 || len(want) != len(pre.reqs) {
		t.Fatalf("pregenerated %d requests, %d distinct; want at least 100, all distinct", len(pre.reqs), len(want))
	}
	res, err := Open(context.Background(), tgt, pre, "pre", 200, 500*time.Millisecond, nil, nil)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	if sent := int(f.n.Load()); sent < 90 || res.Codes[202] != sent {
		t.Errorf("server saw %d requests, codes %v; want about 100, all 202", sent, res.Codes)
	}
	for body, n := range seen {
		if !want[body] || n != 1 {
			t.Errorf("a body sent %d times, pregenerated: %v", n, want[body])
		}
	}

	// A source that runs out ends the load with ErrExhausted, having sent
	// exactly what it had.
	few, err := Pregenerate(newGen(t, 1), 3)
	if err != nil {
		t.Fatal(err)
	}
	before := f.n.Load()
	if _, err := Open(context.Background(), tgt, few, "few", 200, 500*time.Millisecond, nil, nil); !errors.Is(err, ErrExhausted) {
		t.Errorf("Open past the end = %v, want ErrExhausted", err)
	}
	if got := f.n.Load() - before; got != 3 {
		t.Errorf("server saw %d requests from 3 pregenerated, want 3", got)
	}
	if _, err := Pregenerate(newGen(t, 1), MaxCount+1); err == nil {
		t.Error("Pregenerate past MaxCount: no error")
	}
}
