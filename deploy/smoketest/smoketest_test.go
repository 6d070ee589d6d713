package smoketest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStack is a collector that records the threats it accepted and a
// renderer that counts them after a delay, both checking their credentials.
type fakeStack struct {
	mu       sync.Mutex
	accepted map[string]time.Time
	delay    time.Duration
	status   int
}

func (f *fakeStack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/events":
		if r.Header.Get("Authorization") != "Bearer app-token" {
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
			return
		}
		var ev struct {
			App     struct{ ID string } `json:"app"`
			Threats []string            `json:"threats"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.App.ID != "smoke-app" || len(ev.Threats) != 1 {
			http.Error(w, `{"error":{"code":"invalid_event"}}`, http.StatusUnprocessableEntity)
			return
		}
		if f.status != 0 {
			http.Error(w, `{"error":{"code":"unavailable"}}`, f.status)
			return
		}
		f.mu.Lock()
		f.accepted[ev.Threats[0]] = time.Now()
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"accepted":1,"ids":["x"]}`)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/stats/threat":
		if r.Header.Get("Authorization") != "Bearer admin-key" || r.URL.Query().Get("app_id") != "smoke-app" {
			http.Error(w, `{"error":{"code":"forbidden"}}`, http.StatusForbidden)
			return
		}
		type series struct {
			Key   string `json:"key"`
			Total int64  `json:"total"`
		}
		out := struct {
			Series []series `json:"series"`
		}{Series: []series{{Key: "other", Total: 40}}}
		f.mu.Lock()
		for k, at := range f.accepted {
			if time.Since(at) >= f.delay {
				out.Series = append(out.Series, series{Key: k, Total: 1})
			}
		}
		f.mu.Unlock()
		json.NewEncoder(w).Encode(out)
	default:
		http.NotFound(w, r)
	}
}

func config(url string) Config {
	return Config{CollectorURL: url, RendererURL: url, AppID: "smoke-app", Token: "app-token", AdminKey: "admin-key", Timeout: 10 * time.Second}
}

func TestRunWaitsUntilCounted(t *testing.T) {
	f := &fakeStack{accepted: map[string]time.Time{}, delay: 1500 * time.Millisecond}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var log strings.Builder
	start := time.Now()
	if err := Run(context.Background(), config(srv.URL), srv.Client(), &log); err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	if time.Since(start) < f.delay {
		t.Errorf("Run returned after %s, before the event was counted", time.Since(start))
	}
	if !strings.Contains(log.String(), "counted after") {
		t.Errorf("log %q", log.String())
	}
}

func TestRunFailsWhenNotAcceptedOrNotCounted(t *testing.T) {
	f := &fakeStack{accepted: map[string]time.Time{}, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(f)
	defer srv.Close()
	err := Run(context.Background(), config(srv.URL), srv.Client(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("collector 503: Run = %v, want an error naming 503", err)
	}

	f = &fakeStack{accepted: map[string]time.Time{}, delay: time.Hour}
	srv2 := httptest.NewServer(f)
	defer srv2.Close()
	cfg := config(srv2.URL)
	cfg.Timeout = 1500 * time.Millisecond
	err = Run(context.Background(), cfg, srv2.Client(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not counted") {
		t.Errorf("never counted: Run = %v, want a timeout error", err)
	}

	cfg = config(srv2.URL)
	cfg.Token = "wrong"
	if err := Run(context.Background(), cfg, srv2.Client(), io.Discard); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong token: Run = %v, want 401", err)
	}
}

func TestLoad(t *testing.T) {
	env := map[string]string{"SMOKE_COLLECTOR_URL": "http://c:8080", "SMOKE_RENDERER_URL": "http://r:8086",
		"SMOKE_APP_ID": "a", "SMOKE_APP_TOKEN": "t", "ADMIN_KEY": "k"}
	cfg, err := Load(func(k string) string { return env[k] })
	if err != nil || cfg.Timeout != 2*time.Minute || cfg.AppID != "a" {
		t.Fatalf("Load = %+v, %v", cfg, err)
	}
	env["SMOKE_TIMEOUT"] = "30s"
	if cfg, _ := Load(func(k string) string { return env[k] }); cfg.Timeout != 30*time.Second {
		t.Errorf("SMOKE_TIMEOUT 30s gave %s", cfg.Timeout)
	}
	env["SMOKE_RENDERER_URL"] = "renderer:8086"
	if _, err := Load(func(k string) string { return env[k] }); err == nil {
		t.Error("a URL without scheme was accepted")
	}
	delete(env, "SMOKE_APP_TOKEN")
	if _, err := Load(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "SMOKE_APP_TOKEN") {
		t.Errorf("missing token: %v", err)
	}
}
