package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"threatview/identity/mariadb"
	"threatview/migrations"
	"threatview/platform/testenv"
	"threatview/platform/wire"
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

const (
	testSeed     = "5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f5e0f"
	testPassword = "first admin password"
)

// start runs the service until the test ends and returns its address and log.
func start(t *testing.T, env map[string]string) (string, *testenv.SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(k string) string { return env[k] }, out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run() = %v after cancel, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run() did not return after cancel")
		}
	})
	var addr string
	testenv.MustPing(t, 15*time.Second, "identity run()", func() error {
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
	return addr, out
}

// migratedDB is a fresh identity database, migrated, closed at the end.
func migratedDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := testenv.MustMariaDB(t)
	db, err := mariadb.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(context.Background(), db, migrations.Identity); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

func TestRun(t *testing.T) {
	dsn, _ := migratedDB(t)
	env := map[string]string{
		"HTTP_ADDR":                         "127.0.0.1:0",
		"IDENTITY_DATABASE_DSN":             dsn,
		"IDENTITY_SIGNING_KEYS":             testSeed,
		"ADMIN_KEY":                         "run-admin",
		"INTERNAL_KEY":                      "run-internal",
		"IDENTITY_BOOTSTRAP_ADMIN_USER":     "first-admin",
		"IDENTITY_BOOTSTRAP_ADMIN_PASSWORD": testPassword,
		"IDENTITY_ARGON2_MEMORY_KIB":        "1024",
		"IDENTITY_ARGON2_TIME":              "1",
	}
	// Twice: the first admin is created once, and a restart keeps them.
	for i := range 2 {
		addr, out := start(t, env)
		for _, p := range []string{"/healthz", "/readyz", "/.well-known/jwks.json"} {
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
		resp, err := http.Post("http://"+addr+"/v1/login", "application/json",
			bytes.NewReader([]byte(`{"username":"first-admin","password":"`+testPassword+`"}`)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"roles":["admin"]`) {
			t.Fatalf("start %d: login of the first admin = %d %s", i, resp.StatusCode, body)
		}
		wantCreated := `"created":true`
		if i == 1 {
			wantCreated = `"created":false`
		}
		if !strings.Contains(out.String(), wantCreated) {
			t.Fatalf("start %d: log lacks %s:\n%s", i, wantCreated, out)
		}
		for _, secret := range []string{"run-admin", "run-internal", testSeed, testPassword} {
			if strings.Contains(out.String(), secret) {
				t.Fatalf("log shows a secret (%.6s…):\n%s", secret, out)
			}
		}
	}
}

// TestRun_BootstrapWaitsForAudit starts the service while the audit logger
// still refuses records: the first admin is created once it accepts them.
func TestRun_BootstrapWaitsForAudit(t *testing.T) {
	dsn, _ := migratedDB(t)
	var calls atomic.Int32
	var actions sync.Map
	audit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var b wire.AuditBatch
		_ = json.NewDecoder(r.Body).Decode(&b)
		for _, rec := range b.Records {
			actions.Store(rec.Action+" "+rec.ActorToken, true)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer audit.Close()
	addr, _ := start(t, map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "IDENTITY_DATABASE_DSN": dsn, "IDENTITY_SIGNING_KEYS": testSeed,
		"INTERNAL_KEY": "run-internal", "AUDITLOGGER_SERVICE_URL": audit.URL,
		"IDENTITY_BOOTSTRAP_ADMIN_USER": "first-admin", "IDENTITY_BOOTSTRAP_ADMIN_PASSWORD": testPassword,
		"IDENTITY_ARGON2_MEMORY_KIB": "1024", "IDENTITY_ARGON2_TIME": "1",
	})
	resp, err := http.Post("http://"+addr+"/v1/login", "application/json",
		bytes.NewReader([]byte(`{"username":"first-admin","password":"`+testPassword+`"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("login of the first admin = %d", resp.StatusCode)
	}
	if _, ok := actions.Load("identity.user_create identity-bootstrap"); !ok {
		t.Fatal("no identity.user_create record with actor identity-bootstrap")
	}
}

func TestRun_BadConfig(t *testing.T) {
	base := map[string]string{"IDENTITY_DATABASE_DSN": "u:p@tcp(127.0.0.1:1)/x", "IDENTITY_SIGNING_KEYS": testSeed}
	for _, c := range []struct {
		name, key, value, want string
	}{
		{"NoDSN", "IDENTITY_DATABASE_DSN", "", "IDENTITY_DATABASE_DSN"},
		{"NoKeys", "IDENTITY_SIGNING_KEYS", "", "IDENTITY_SIGNING_KEYS"},
		{"BadKey", "IDENTITY_SIGNING_KEYS", "nope", "IDENTITY_SIGNING_KEYS"},
		{"LongAccessTTL", "IDENTITY_ACCESS_TOKEN_TTL", "10m", "IDENTITY_ACCESS_TOKEN_TTL"},
		{"ShortBootstrapPassword", "IDENTITY_BOOTSTRAP_ADMIN_USER", "root", "IDENTITY_BOOTSTRAP_ADMIN_PASSWORD"},
		{"BadProxy", "IDENTITY_TRUSTED_PROXIES", "nope", "IDENTITY_TRUSTED_PROXIES"},
		{"OIDCWithoutClient", "IDENTITY_OIDC_ISSUER", "https://idp.example", "IDENTITY_OIDC_CLIENT_ID"},
		{"AuditWithoutKey", "AUDITLOGGER_SERVICE_URL", "http://127.0.0.1:8081", "INTERNAL_KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			env[c.key] = c.value
			err := run(context.Background(), func(k string) string { return env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run() = %v, want an error naming %s", err, c.want)
			}
			if strings.Contains(err.Error(), testSeed) {
				t.Fatalf("error shows the signing key: %v", err)
			}
		})
	}
}

// TestRun_RescueOwner: the only owner locked and demoted behind the
// service's back (the API refuses both), a start with IDENTITY_RESCUE_OWNER
// gives them back: unlocked, an owner again, with the rescue password.
func TestRun_RescueOwner(t *testing.T) {
	dsn, db := migratedDB(t)
	env := map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "IDENTITY_DATABASE_DSN": dsn, "IDENTITY_SIGNING_KEYS": testSeed,
		"IDENTITY_BOOTSTRAP_ADMIN_USER": "owner", "IDENTITY_BOOTSTRAP_ADMIN_PASSWORD": testPassword,
		"IDENTITY_ARGON2_MEMORY_KIB": "1024", "IDENTITY_ARGON2_TIME": "1",
	}
	start(t, env)
	if _, err := db.Exec("UPDATE users SET disabled = TRUE, roles = 'analyst' WHERE username = 'owner'"); err != nil {
		t.Fatal(err)
	}
	const rescuePW = "rescued owner password"
	env["IDENTITY_RESCUE_OWNER"], env["IDENTITY_RESCUE_PASSWORD"] = "owner", rescuePW
	addr, out := start(t, env)
	login := func(password string) (int, string) {
		resp, err := http.Post("http://"+addr+"/v1/login", "application/json",
			bytes.NewReader([]byte(`{"username":"owner","password":"`+password+`"}`)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := login(rescuePW); code != 200 || !strings.Contains(body, `"roles":["admin","analyst"]`) {
		t.Fatalf("login after rescue = %d %s, want 200 with roles admin and analyst", code, body)
	}
	if code, _ := login(testPassword); code != 401 {
		t.Fatalf("login with the old password after rescue = %d, want 401", code)
	}
	if strings.Contains(out.String(), rescuePW) || !strings.Contains(out.String(), "owner rescued") {
		t.Fatalf("log shows the rescue password or lacks the rescue:\n%s", out)
	}
}
