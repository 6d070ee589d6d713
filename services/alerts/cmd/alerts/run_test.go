package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"threatview/alerts/internal/pgtest"
	"threatview/platform/testenv"
)

func TestRun(t *testing.T) {
	url, _, _ := pgtest.MustStore(t)
	env := map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "ALERTS_DATABASE_URL": url, "ADMIN_KEY": "run-admin", "INTERNAL_KEY": "i",
		"AUDITLOGGER_SERVICE_URL": "http://127.0.0.1:1", "ALERTS_EVALUATE_EVERY": "200ms",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(k string) string { return env[k] }, out) }()
	var addr string
	testenv.MustPing(t, 10*time.Second, "alerts run()", func() error {
		select {
		case err := <-done:
			t.Fatalf("run() returned early: %v\n%s", err, out)
		default:
		}
		if addr = testenv.ListenAddr(out.String()); addr == "" {
			return io.ErrNoProgress
		}
		return nil
	})
	get := func(path, key string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, key string
		want      int
	}{
		{"/healthz", "", 200}, {"/readyz", "", 200}, {"/openapi.json", "", 200},
		{"/v1/alert-rules", "", 401}, {"/v1/alert-rules", "run-admin", 200}, {"/v1/forwarders", "run-admin", 200},
	} {
		if code, body := get(c.path, c.key); code != c.want {
			t.Errorf("GET %s = %d %s, want %d", c.path, code, body, c.want)
		}
	}
	// The one replica takes the leader lock and evaluates.
	testenv.MustPing(t, 10*time.Second, "an evaluation round", func() error {
		if _, body := get("/metrics", ""); !strings.Contains(body, "alerts_evaluations_total") ||
			strings.Contains(body, "alerts_evaluations_total 0\n") {
			return io.ErrNoProgress
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run() = %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run() did not return after cancel")
	}
}

func TestConfig_Validate(t *testing.T) {
	base := map[string]string{"ALERTS_DATABASE_URL": "postgres://x", "ADMIN_KEY": "a", "INTERNAL_KEY": "i",
		"AUDITLOGGER_SERVICE_URL": "http://127.0.0.1:8081"}
	for _, c := range []struct{ key, value, want string }{
		{"ALERTS_EVALUATE_EVERY", "31s", "ALERTS_EVALUATE_EVERY"},
		{"AUDITLOGGER_SERVICE_URL", "ftp://x", "AUDITLOGGER_SERVICE_URL"},
		{"ALERTS_SMTP_ADDR", "nohostport", "ALERTS_SMTP_ADDR"},
		{"ALERTS_FORWARD_BATCH", "0", "ALERTS_FORWARD_BATCH"},
		{"ALERTS_EGRESS_ALLOW", "10.0.0.0/33", "ALERTS_EGRESS_ALLOW"},
		{"ALERTS_EGRESS_ALLOW", "siem.internal", "ALERTS_EGRESS_ALLOW"},
		{"ALERTS_S3_BUCKETS", "a,b/c", "ALERTS_S3_BUCKETS"},
		{"ALERTS_FORWARD_MAX_BACKLOG", "10", "ALERTS_FORWARD_MAX_BACKLOG"},
		{"ALERTS_SMTP_TLS", "maybe", "ALERTS_SMTP_TLS"},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		env[c.key] = c.value
		err := run(context.Background(), func(k string) string { return env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: run() = %v, want an error naming %s", c.key, c.value, err, c.want)
		}
	}
}
