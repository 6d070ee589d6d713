package threatview_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"threatview/sdk/go/threatview"
)

// fakeCollector is the collector's contract in miniature: it checks what
// the client sends and keeps the events by event_id. answer, when set,
// may answer a request instead (return 0 to accept it).
type fakeCollector struct {
	t *testing.T

	mu       sync.Mutex
	stored   map[string]int // event_id → times accepted
	requests []request
	answer   func(n int, events []map[string]any, w http.ResponseWriter) int
}

type request struct {
	at     time.Time
	events []map[string]any
	status int
}

func newFake(t *testing.T) (*fakeCollector, *httptest.Server) {
	f := &fakeCollector{t: t, stored: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/events" || r.Method != http.MethodPost {
		http.Error(w, "wrong route", http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Content-Encoding") != "gzip" {
		f.t.Errorf("headers %v", r.Header)
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		f.t.Errorf("body is not gzip: %v", err)
		return
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		f.t.Errorf("read gzip body: %v", err)
		return
	}
	if len(data) > threatview.MaxRequestBytes {
		f.t.Errorf("body of %d bytes, over the collector's limit", len(data))
	}
	var b struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		f.t.Errorf("body %.200s: %v", data, err)
		return
	}
	if len(b.Events) == 0 || len(b.Events) > threatview.MaxBatchEvents {
		f.t.Errorf("batch of %d events", len(b.Events))
	}
	events := make([]map[string]any, len(b.Events))
	for i, raw := range b.Events {
		if len(raw) > threatview.MaxEventBytes {
			f.t.Errorf("event of %d bytes", len(raw))
		}
		if err := json.Unmarshal(raw, &events[i]); err != nil {
			f.t.Errorf("event %s: %v", raw, err)
		}
		id, _ := events[i]["event_id"].(string)
		if u, err := uuid.Parse(id); err != nil || len(id) != 36 {
			f.t.Errorf("event_id %q is not a UUID", id)
		} else if u.Version() != 7 {
			f.t.Errorf("event_id %q is not a UUIDv7", id)
		}
	}
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, request{at: time.Now(), events: events})
	answer := f.answer
	f.mu.Unlock()
	status := 0
	if answer != nil {
		status = answer(n, events, w)
	}
	if status == 0 {
		f.mu.Lock()
		for _, e := range events {
			f.stored[e["event_id"].(string)]++
		}
		f.mu.Unlock()
		status = http.StatusAccepted
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"accepted":%d,"ids":[]}`, len(events))
	}
	f.mu.Lock()
	f.requests[n].status = status
	f.mu.Unlock()
}

func (f *fakeCollector) snapshot() (map[string]int, []request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := make(map[string]int, len(f.stored))
	for k, v := range f.stored {
		s[k] = v
	}
	return s, append([]request(nil), f.requests...)
}

func writeError(w http.ResponseWriter, status int, code string, details string, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":"test","details":%s}}`, code, details)
}

func event(i int) threatview.Event {
	return threatview.Event{
		Type:       "app.startup",
		OccurredAt: time.Now().UTC(),
		App:        threatview.App{ID: "app-1", Version: "1.0"},
		Device:     threatview.Device{Model: "Pixel 8", OS: "android"},
		Threats:    []any{"root", threatview.Threat{Type: "hook"}},
		Attributes: map[string]any{"i": i},
	}
}

func newClient(t *testing.T, cfg threatview.Config) *threatview.Client {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = "tok"
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 5 * time.Millisecond
		cfg.MaxBackoff = 50 * time.Millisecond
	}
	c, err := threatview.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sendAll sends n events and returns their ids.
func sendAll(t *testing.T, c *threatview.Client, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ev := event(i)
		ev.EventID = uuid.Must(uuid.NewV7()).String()
		ids[i] = ev.EventID
		if err := c.Send(context.Background(), ev); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	return ids
}

func closeOK(t *testing.T, c *threatview.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func checkOnce(t *testing.T, stored map[string]int, ids []string) {
	t.Helper()
	for _, id := range ids {
		if stored[id] != 1 {
			t.Errorf("event %s accepted %d times, want once", id, stored[id])
		}
	}
	if len(stored) != len(ids) {
		t.Errorf("%d events stored, want %d", len(stored), len(ids))
	}
}

func TestClient_Batching(t *testing.T) {
	f, srv := newFake(t)
	c := newClient(t, threatview.Config{URL: srv.URL, FlushInterval: time.Hour})
	ids := sendAll(t, c, 1234)
	closeOK(t, c)
	stored, reqs := f.snapshot()
	checkOnce(t, stored, ids)
	if len(reqs) != 3 {
		t.Errorf("%d requests for 1234 events, want 3 (500, 500, 234)", len(reqs))
	}
	for _, r := range reqs {
		if r.events[0]["sent_at"] == nil {
			t.Errorf("event without sent_at: %v", r.events[0])
		}
	}
	if s := c.Stats(); s.Queued != 1234 || s.Delivered != 1234 || s.Pending != 0 || s.Dropped != 0 {
		t.Errorf("Stats = %+v", s)
	}

	t.Run("Bytes", func(t *testing.T) {
		f, srv := newFake(t)
		c := newClient(t, threatview.Config{URL: srv.URL, FlushInterval: time.Hour})
		big := strings.Repeat("x", 30<<10)
		for i := range 100 {
			ev := event(i)
			ev.Attributes["pad"] = big
			if err := c.Send(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
		}
		closeOK(t, c)
		stored, reqs := f.snapshot()
		if len(stored) != 100 || len(reqs) < 3 {
			t.Errorf("%d stored in %d requests, want 100 in at least 3 (1 MiB each)", len(stored), len(reqs))
		}
	})

	t.Run("FlushInterval", func(t *testing.T) {
		f, srv := newFake(t)
		c := newClient(t, threatview.Config{URL: srv.URL, FlushInterval: 50 * time.Millisecond})
		defer closeOK(t, c)
		sendAll(t, c, 3)
		deadline := time.Now().Add(5 * time.Second)
		for {
			if stored, _ := f.snapshot(); len(stored) == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("3 events not sent within 5s with a 50ms flush interval")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("ErrEventTooLarge", func(t *testing.T) {
		_, srv := newFake(t)
		c := newClient(t, threatview.Config{URL: srv.URL})
		defer closeOK(t, c)
		ev := event(0)
		ev.Attributes["pad"] = strings.Repeat("x", 33<<10)
		if err := c.Send(context.Background(), ev); !errors.Is(err, threatview.ErrEventTooLarge) {
			t.Errorf("Send(33 KiB) = %v, want ErrEventTooLarge", err)
		}
		if err := c.Send(context.Background(), threatview.Event{Type: "x"}); !errors.Is(err, threatview.ErrInvalidEvent) {
			t.Errorf("Send(no app) = %v, want ErrInvalidEvent", err)
		}
	})
}

func TestClient_Retry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		after  string
	}{
		{"503RetryAfter", http.StatusServiceUnavailable, "1"},
		{"429RetryAfter", http.StatusTooManyRequests, "1"},
		{"500", http.StatusInternalServerError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFake(t)
			f.answer = func(n int, _ []map[string]any, w http.ResponseWriter) int {
				if n < 2 {
					writeError(w, tc.status, "unavailable", "null", tc.after)
					return tc.status
				}
				return 0
			}
			c := newClient(t, threatview.Config{URL: srv.URL})
			ids := sendAll(t, c, 10)
			closeOK(t, c)
			stored, reqs := f.snapshot()
			checkOnce(t, stored, ids)
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			for i := 1; i < 3; i++ {
				gap := reqs[i].at.Sub(reqs[i-1].at)
				if tc.after != "" && gap < time.Second {
					t.Errorf("retry %d after %v, want at least Retry-After 1s", i, gap)
				}
				if got, want := reqs[i].events[0]["event_id"], reqs[0].events[0]["event_id"]; got != want {
					t.Errorf("retry sent event_id %v, want the same %v", got, want)
				}
			}
			s := c.Stats()
			if s.Retries != 2 || s.Requests != 3 || s.Delivered != 10 {
				t.Errorf("Stats = %+v", s)
			}
			if tc.status == http.StatusTooManyRequests && s.Throttled != 2 {
				t.Errorf("Throttled = %d, want 2", s.Throttled)
			}
		})
	}

	t.Run("NetworkError", func(t *testing.T) {
		f, srv := newFake(t)
		// A listener that drops its first two connections, then proxies.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for n := 0; ; n++ {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				if n < 2 {
					conn.Close()
					continue
				}
				go proxy(conn, strings.TrimPrefix(srv.URL, "http://"))
			}
		}()
		c := newClient(t, threatview.Config{URL: "http://" + ln.Addr().String()})
		ids := sendAll(t, c, 5)
		closeOK(t, c)
		stored, _ := f.snapshot()
		checkOnce(t, stored, ids)
		if s := c.Stats(); s.Retries < 1 {
			t.Errorf("Retries = %d, want at least 1", s.Retries)
		}
	})

	t.Run("MaxAttempts", func(t *testing.T) {
		f, srv := newFake(t)
		f.answer = func(int, []map[string]any, http.ResponseWriter) int { panic(http.ErrAbortHandler) }
		var drops []threatview.Drop
		var mu sync.Mutex
		c := newClient(t, threatview.Config{URL: srv.URL, MaxAttempts: 3, OnDrop: func(d threatview.Drop) {
			mu.Lock()
			drops = append(drops, d)
			mu.Unlock()
		}})
		sendAll(t, c, 4)
		closeOK(t, c)
		_, reqs := f.snapshot()
		if len(reqs) != 3 || len(drops) != 1 || len(drops[0].EventIDs) != 4 || drops[0].Reason != threatview.DropRetriesExhausted || drops[0].Err == nil {
			t.Errorf("%d requests, drops %+v; want 3 requests and one drop of 4 events", len(reqs), drops)
		}
	})
}

func proxy(conn net.Conn, to string) {
	defer conn.Close()
	up, err := net.Dial("tcp", to)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(up, conn)
	io.Copy(conn, up)
}

func TestClient_Rejected(t *testing.T) {
	t.Run("OneBadEvent", func(t *testing.T) {
		f, srv := newFake(t)
		var bad string
		f.answer = func(n int, events []map[string]any, w http.ResponseWriter) int {
			for i, e := range events {
				if e["type"] == "bad" {
					bad = e["event_id"].(string)
					writeError(w, http.StatusUnprocessableEntity, "invalid_event", fmt.Sprintf(`{"index":%d,"field":"type"}`, i), "")
					return http.StatusUnprocessableEntity
				}
			}
			return 0
		}
		var drops []threatview.Drop
		c := newClient(t, threatview.Config{URL: srv.URL, OnDrop: func(d threatview.Drop) { drops = append(drops, d) }})
		ids := sendAll(t, c, 5)
		ev := event(9)
		ev.Type = "bad"
		if err := c.Send(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sendAll(t, c, 5)...)
		closeOK(t, c)
		stored, reqs := f.snapshot()
		checkOnce(t, stored, ids)
		if len(reqs) != 2 {
			t.Errorf("%d requests, want 2 (the batch, then the batch without the bad event)", len(reqs))
		}
		if len(drops) != 1 || len(drops[0].EventIDs) != 1 || drops[0].EventIDs[0] != bad || drops[0].Status != 422 || drops[0].Code != "invalid_event" {
			t.Errorf("drops = %+v, want the bad event with 422 invalid_event", drops)
		}
	})

	for _, status := range []int{400, 401, 403, 404, 413} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f, srv := newFake(t)
			f.answer = func(_ int, _ []map[string]any, w http.ResponseWriter) int {
				writeError(w, status, "nope", "null", "")
				return status
			}
			var dropped []string
			c := newClient(t, threatview.Config{URL: srv.URL, OnDrop: func(d threatview.Drop) {
				if d.Reason != threatview.DropRejected || d.Status != status {
					t.Errorf("drop %+v", d)
				}
				dropped = append(dropped, d.EventIDs...)
			}})
			ids := sendAll(t, c, 7)
			closeOK(t, c)
			_, reqs := f.snapshot()
			if len(reqs) != 1 {
				t.Errorf("%d requests, want 1: a %d is never retried", len(reqs), status)
			}
			if len(dropped) != len(ids) {
				t.Errorf("%d events reported dropped, want %d", len(dropped), len(ids))
			}
			if s := c.Stats(); s.Dropped != 7 || s.Retries != 0 || s.Pending != 0 {
				t.Errorf("Stats = %+v", s)
			}
		})
	}
}

func TestClient_Queue(t *testing.T) {
	f, srv := newFake(t)
	release := make(chan struct{})
	f.answer = func(int, []map[string]any, http.ResponseWriter) int { <-release; return 0 }
	c := newClient(t, threatview.Config{URL: srv.URL, QueueSize: 500, Concurrency: 1, FlushInterval: time.Millisecond})
	sendAll(t, c, 500)
	if err := c.TrySend(event(0)); !errors.Is(err, threatview.ErrQueueFull) {
		t.Errorf("TrySend on a full queue = %v, want ErrQueueFull", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Send(ctx, event(0)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send on a full queue = %v, want it to block until ctx ends", err)
	}
	close(release)
	if err := c.Send(context.Background(), event(0)); err != nil {
		t.Errorf("Send once there is room = %v", err)
	}
	closeOK(t, c)
	if err := c.Send(context.Background(), event(0)); !errors.Is(err, threatview.ErrClosed) {
		t.Errorf("Send after Close = %v, want ErrClosed", err)
	}

	t.Run("CloseDrops", func(t *testing.T) {
		f, srv := newFake(t)
		f.answer = func(_ int, _ []map[string]any, w http.ResponseWriter) int {
			writeError(w, 503, "unavailable", "null", "1")
			return 503
		}
		var dropped int
		c := newClient(t, threatview.Config{URL: srv.URL, OnDrop: func(d threatview.Drop) {
			if d.Reason == threatview.DropClosed && d.Status == 503 && d.Code == "unavailable" {
				dropped += len(d.EventIDs)
			}
		}})
		sendAll(t, c, 20)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := c.Close(ctx); !errors.Is(err, threatview.ErrUndelivered) {
			t.Errorf("Close = %v, want ErrUndelivered", err)
		}
		if dropped != 20 {
			t.Errorf("%d events reported dropped on Close with the last 503, want 20", dropped)
		}
		if s := c.Stats(); !strings.Contains(s.LastError, "HTTP 503 unavailable") {
			t.Errorf("Stats.LastError = %q, want the last 503", s.LastError)
		}
	})
}

func TestClient_Spool(t *testing.T) {
	dir := t.TempDir()
	down, srvDown := newFake(t)
	down.answer = func(_ int, _ []map[string]any, w http.ResponseWriter) int {
		writeError(w, 503, "unavailable", "null", "1")
		return 503
	}
	c := newClient(t, threatview.Config{URL: srvDown.URL, SpoolDir: dir, MaxBatchEvents: 100, FlushInterval: time.Hour})
	ids := sendAll(t, c, 250)
	// Another client cannot use the directory meanwhile.
	if _, err := threatview.New(threatview.Config{URL: srvDown.URL, Token: "tok", SpoolDir: dir}); err == nil {
		t.Error("a second client opened a spool in use")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Close(ctx); !errors.Is(err, threatview.ErrUndelivered) {
		t.Errorf("Close(cancelled) = %v, want ErrUndelivered", err)
	}
	// A crash in the middle of a line leaves half a line in the open file.
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000099.open"), []byte(`1{"event_id":"half`), 0o600); err != nil {
		t.Fatal(err)
	}

	up, srvUp := newFake(t)
	c2 := newClient(t, threatview.Config{URL: srvUp.URL, SpoolDir: dir})
	if s := c2.Stats(); s.Pending != 250 || s.SpoolBytes == 0 {
		t.Errorf("reopened Stats = %+v, want 250 pending", s)
	}
	more := sendAll(t, c2, 10)
	closeOK(t, c2)
	stored, _ := up.snapshot()
	checkOnce(t, stored, append(ids, more...))
	left, _ := filepath.Glob(filepath.Join(dir, "*.*"))
	if len(left) != 0 {
		t.Errorf("spool files left after delivery: %v", left)
	}
}

func TestSendRaw(t *testing.T) {
	f, srv := newFake(t)
	c := newClient(t, threatview.Config{URL: srv.URL})
	given := uuid.Must(uuid.NewV7()).String()
	for _, line := range []string{
		`{"type":"app.startup","app":{"id":"a"},"event_id":"` + given + `"}`,
		`{"type":"app.startup","app":{"id":"a"},
		  "sent_at":"2026-01-01T00:00:00Z"}`,
	} {
		if err := c.SendRaw(context.Background(), []byte(line)); err != nil {
			t.Fatalf("SendRaw(%q) = %v", line, err)
		}
	}
	for _, bad := range []string{`[1]`, `null`, "{\"type\":\"\xff\"}", `{"event_id":5}`} {
		if err := c.SendRaw(context.Background(), []byte(bad)); !errors.Is(err, threatview.ErrInvalidEvent) {
			t.Errorf("SendRaw(%q) = %v, want ErrInvalidEvent", bad, err)
		}
	}
	closeOK(t, c)
	stored, reqs := f.snapshot()
	if stored[given] != 1 || len(stored) != 2 {
		t.Errorf("stored %v, want the given id and one new", stored)
	}
	if got := reqs[0].events[1]["sent_at"]; got != "2026-01-01T00:00:00Z" {
		t.Errorf("relayed sent_at = %v, want it kept", got)
	}
}
