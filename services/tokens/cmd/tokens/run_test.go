package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"threatview/migrations"
	"threatview/platform/testenv"
	"threatview/tokens/mariadb"
)

func TestRun(t *testing.T) {
	dsn := testenv.MustMariaDB(t)
	db, err := mariadb.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Up(context.Background(), db, migrations.Tokens); err != nil {
		t.Fatal(err)
	}
	broker := testenv.MustBroker(t)
	env := map[string]string{
		"STOMP_ADDR":          broker.Addr,
		"STOMP_LOGIN":         broker.Login,
		"STOMP_PASSCODE":      broker.Passcode,
		"HTTP_ADDR":           "127.0.0.1:0",
		"TOKENS_DATABASE_DSN": dsn,
		"ADMIN_KEY":           "run-admin",
		"INTERNAL_KEY":        "run-internal",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(k string) string { return env[k] }, out) }()

	var addr string
	testenv.MustPing(t, 10*time.Second, "tokens run()", func() error {
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
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s, want 200", p, resp.StatusCode, body)
		}
	}
	if strings.Contains(out.String(), "run-admin") || strings.Contains(out.String(), "run-internal") {
		t.Fatalf("log shows a key:\n%s", out)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run() = %v after cancel, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run() did not return after cancel")
	}
}

func TestRun_BadConfig(t *testing.T) {
	err := run(context.Background(), func(k string) string {
		return map[string]string{"ADMIN_KEY": "a", "INTERNAL_KEY": "b"}[k]
	}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "TOKENS_DATABASE_DSN") {
		t.Fatalf("run() without TOKENS_DATABASE_DSN = %v, want an error naming it", err)
	}
}
