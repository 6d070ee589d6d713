package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/platform/testenv"
	"threatview/visualrenderer/internal/rtest"
)

// listenAddr finds the address in the "http server listening" log line.
func listenAddr(log string) string {
	for _, line := range strings.Split(log, "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http server listening" {
			return rec.Addr
		}
	}
	return ""
}

func TestRun(t *testing.T) {
	url, _ := rtest.MustEventsDB(t)
	env := map[string]string{
		"HTTP_ADDR":             "127.0.0.1:0",
		"RENDERER_DATABASE_URL": url,
		"ADMIN_KEY":             "run-admin",
	}
	addr, out, stop := startRun(t, env)
	for _, c := range []struct {
		path, key string
		want      int
	}{
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/metrics", "", http.StatusOK},
		{"/v1/stats/country", "", http.StatusUnauthorized},
		{"/v1/stats/country", "run-admin", http.StatusOK},
		{"/v1/charts/threat.png", "run-admin", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("GET %s = %d %.200s, want %d", c.path, resp.StatusCode, body, c.want)
		}
	}
	if strings.Contains(out.String(), "run-admin") || strings.Contains(out.String(), "postgres://") {
		t.Fatalf("log shows a secret:\n%s", out)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// startRun starts run() with env on a free port and waits until it
// listens; stop cancels it and returns once it ended.
func startRun(t *testing.T, env map[string]string) (addr string, out *testenv.SyncBuffer, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(k string) string { return env[k] }, out) }()
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					stopErr = fmt.Errorf("run() = %v after cancel, want nil", err)
				}
			case <-time.After(30 * time.Second):
				stopErr = errors.New("run() did not return after cancel")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	testenv.MustPing(t, 10*time.Second, "visualrenderer run()", func() error {
		select {
		case err := <-done:
			t.Fatalf("run() returned early: %v\n%s", err, out)
		default:
		}
		if addr = listenAddr(out.String()); addr == "" {
			return io.ErrNoProgress
		}
		return nil
	})
	return addr, out, stop
}

func TestRun_BadConfig(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ADMIN_KEY": "a"}, "RENDERER_DATABASE_URL"},
		{map[string]string{"RENDERER_DATABASE_URL": "postgres://x/y"}, "IDENTITY_SERVICE_URL"},
		{map[string]string{"ADMIN_KEY": "a", "RENDERER_DATABASE_URL": "postgres://x/y", "IDENTITY_SERVICE_URL": "ftp://id"}, "IDENTITY_SERVICE_URL"},
		{map[string]string{"ADMIN_KEY": "a", "RENDERER_DATABASE_URL": "postgres://x/y", "RENDERER_ADMIN_URL": "admin.example.test"}, "RENDERER_ADMIN_URL"},
		{map[string]string{"ADMIN_KEY": "a", "RENDERER_DATABASE_URL": "postgres://x/y", "RENDERER_TRUSTED_PROXIES": "10.0.0.0/16,ingress.example.com"}, "RENDERER_TRUSTED_PROXIES"},
	} {
		err := run(context.Background(), func(k string) string { return c.env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%v) = %v, want an error naming %s", c.env, err, c.want)
		}
	}
}

// TestRun_PeopleOnly: the renderer starts without the admin key when people
// sign in through identity (it needed ADMIN_KEY before, and asked people
// for it).
func TestRun_PeopleOnly(t *testing.T) {
	url, _ := rtest.MustEventsDB(t)
	idURL, _ := rtest.MustIdentity(t)
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "RENDERER_DATABASE_URL": url, "IDENTITY_SERVICE_URL": idURL}
	addr, _, _ := startRun(t, env)
	resp, err := http.Get("http://" + addr + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `name="username"`) || !strings.Contains(string(body), `name="password"`) {
		t.Fatalf("GET /signin = %d, want the username and password form:\n%.500s", resp.StatusCode, body)
	}
}
