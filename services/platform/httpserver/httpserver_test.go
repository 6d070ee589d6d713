package httpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"threatview/platform/httpserver"
)

func TestMountOps(t *testing.T) {
	r := chi.NewRouter()
	failing := errors.New("db down")
	healthy := true
	httpserver.MountOps(r, httpserver.NewRegistry(), map[string]httpserver.Check{
		"db": func(context.Context) error {
			if healthy {
				return nil
			}
			return failing
		},
	})
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w
	}
	if w := get("/healthz"); w.Code != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200", w.Code)
	}
	if w := get("/readyz"); w.Code != http.StatusOK {
		t.Errorf("GET /readyz healthy = %d, want 200", w.Code)
	}
	healthy = false
	w := get("/readyz")
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz failing = %d, want 503", w.Code)
	}
	var body struct{ Failed map[string]string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Failed["db"] != "db down" {
		t.Errorf("GET /readyz body = %s, want the failing check named", w.Body)
	}
	if w := get("/healthz"); w.Code != http.StatusOK {
		t.Errorf("GET /healthz with a failing dependency = %d, want 200 (it touches none)", w.Code)
	}
	if w := get("/metrics"); w.Code != http.StatusOK {
		t.Errorf("GET /metrics = %d, want 200", w.Code)
	}
}

func TestRequireKey(t *testing.T) {
	h := httpserver.RequireKey("s3cret")(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	tests := []struct {
		name, header string
		want         int
	}{
		{"OK", "Bearer s3cret", http.StatusNoContent},
		{"OK lowercase scheme", "bearer s3cret", http.StatusNoContent},
		{"ErrMissing", "", http.StatusUnauthorized},
		{"ErrWrong", "Bearer nope", http.StatusUnauthorized},
		{"ErrScheme", "Basic s3cret", http.StatusUnauthorized},
		{"ErrPrefix", "Bearer s3cre", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Fatalf("Authorization %q = %d, want %d", tt.header, w.Code, tt.want)
			}
			if w.Code == http.StatusUnauthorized {
				var body httpserver.ErrorBody
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code != "unauthorized" {
					t.Fatalf("401 body = %s, want the JSON error", w.Body)
				}
			}
		})
	}
	if httpserver.KeyEqual("", "") {
		t.Errorf("KeyEqual(\"\", \"\") = true: an unset key must never match")
	}
}

func TestRun_GracefulShutdown(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		w.WriteHeader(http.StatusOK)
	})
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- httpserver.Run(ctx, httpserver.Config{ShutdownTimeout: 10 * time.Second}, "127.0.0.1:0", h, log, func(a net.Addr) { addrc <- a })
	}()
	addr := <-addrc
	respc := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + addr.String() + "/")
		if err != nil {
			respc <- 0
			return
		}
		resp.Body.Close()
		respc <- resp.StatusCode
	}()
	time.Sleep(100 * time.Millisecond) // let the request reach the handler
	cancel()                           // SIGTERM equivalent: drain, don't drop
	close(release)
	if code := <-respc; code != http.StatusOK {
		t.Fatalf("in-flight request during shutdown = %d, want 200", code)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run = %v, want nil after a clean drain", err)
	}
}
