package load

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is a real HTTP server that counts the connections it opened.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func do(t *testing.T, c *http.Client, url, body string) (int, string, error) {
	t.Helper()
	resp, err := c.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestConnTransport_ReusesOneConnectionAndKeepsRequestsApart(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Len", fmt.Sprint(len(b)))
		fmt.Fprintf(w, "echo:%s", b)
	})
	tr := newConnTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i := range 50 {
		body := strings.Repeat("x", i*400) + fmt.Sprint(i) // up to ~20 KB, past the write buffer
		code, got, err := do(t, c, srv.URL, body)
		if err != nil || code != 200 || got != "echo:"+body {
			t.Fatalf("request %d: %d %.40q %v", i, code, got, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("50 requests one after another opened %d connections, want 1", n)
	}

	// Concurrent requests: each gets its own answer, and connections are
	// bounded by the concurrency, not the request count.
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				body := fmt.Sprintf("g%d-r%d", g, i)
				code, got, err := do(t, c, srv.URL, body)
				if err != nil || code != 200 || got != "echo:"+body {
					errs <- fmt.Errorf("%s: %d %q %v", body, code, got, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := conns.Load(); n > 11 {
		t.Errorf("10 concurrent clients opened %d connections in all, want at most 11", n)
	}
}

func TestConnTransport_ClosesWhatCannotBeReused(t *testing.T) {
	var n atomic.Int64
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1: // the server asks to close
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		case 2: // a body the client leaves half read
			io.WriteString(w, strings.Repeat("y", 64<<10))
		default:
			io.WriteString(w, "ok")
		}
	})
	tr := newConnTransport(5 * time.Second)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	if code, got, err := do(t, c, srv.URL, "1"); err != nil || code != 200 || got != "bye" {
		t.Fatalf("first: %d %q %v", code, got, err)
	}
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil { // drains the rest
		t.Fatal(err)
	}
	for i := range 3 {
		if code, got, err := do(t, c, srv.URL, "3"); err != nil || code != 200 || got != "ok" {
			t.Fatalf("after: %d: %d %q %v", i, code, got, err)
		}
	}
	// One connection closed at the server's request, then one for the rest:
	// the drained body's connection was reused.
	if got := conns.Load(); got != 2 {
		t.Errorf("opened %d connections, want 2", got)
	}
}

func TestConnTransport_TimesOutAStalledServer(t *testing.T) {
	release := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tr := newConnTransport(200 * time.Millisecond)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	start := time.Now()
	_, _, err := do(t, c, srv.URL, "x")
	if err == nil {
		t.Fatal("a server that never answers gave no error")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("gave up after %s, want about 200ms", el)
	}
	// A context deadline earlier than the timeout wins.
	tr.timeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
	start = time.Now()
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("no error past the context's deadline")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("context deadline: gave up after %s, want about 150ms", el)
	}
}

func TestConnTransport_RefusesTLS(t *testing.T) {
	c := &http.Client{Transport: newConnTransport(time.Second)}
	if _, err := c.Get("https://127.0.0.1:1/"); err == nil || !strings.Contains(err.Error(), "only http") {
		t.Errorf("https: err = %v, want a refusal", err)
	}
}
