// Package e2etest holds what the end-to-end tests share: the running
// stack's addresses and keys (from .run/env), fresh apps with their own
// token, HTTP helpers that check the JSON error body, and database handles
// for checking what was stored.
//
// Every test in this module drives the real stack (`make up`); under
// `make test` a missing address fails the test (testenv.MustEnv).
package e2etest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/testenv"
)

// Env is the running stack as the tests see it.
type Env struct {
	CollectorURL   string
	TokensURL      string
	AuditURL       string
	ProcessorURL   string
	AuditWorkerURL string
	AdminKey       string
	InternalKey    string
	DemoToken      string
	EventsURL      string // Postgres URL of the events DB
	AuditDSN       string // go-sql-driver DSN of the audit DB
	TokensDSN      string // go-sql-driver DSN of the tokens DB
}

// MustEnv reads the stack's addresses and keys; a missing one skips the test,
// or fails it under make test.
func MustEnv(tb testing.TB) Env {
	tb.Helper()
	return Env{
		CollectorURL:   testenv.MustEnv(tb, "THREATVIEW_COLLECTOR_URL"),
		TokensURL:      testenv.MustEnv(tb, "THREATVIEW_TOKENS_URL"),
		AuditURL:       testenv.MustEnv(tb, "THREATVIEW_AUDIT_URL"),
		ProcessorURL:   envOr("THREATVIEW_PROCESSOR_URL", "http://127.0.0.1:8082"),
		AuditWorkerURL: envOr("THREATVIEW_AUDITWORKER_URL", "http://127.0.0.1:8084"),
		AdminKey:       testenv.MustEnv(tb, "THREATVIEW_ADMIN_KEY"),
		InternalKey:    testenv.MustEnv(tb, "INTERNAL_KEY"),
		DemoToken:      os.Getenv("THREATVIEW_DEMO_TOKEN"),
		EventsURL:      testenv.MustEnv(tb, "EVENTS_DATABASE_URL"),
		AuditDSN:       testenv.MustEnv(tb, "AUDIT_DATABASE_DSN"),
		TokensDSN:      testenv.MustEnv(tb, "TOKENS_DATABASE_DSN"),
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// ServiceURLs names every service's base URL, for health checks.
func (e Env) ServiceURLs() map[string]string {
	return map[string]string{
		"collector":   e.CollectorURL,
		"tokens":      e.TokensURL,
		"auditlogger": e.AuditURL,
		"processor":   e.ProcessorURL,
		"auditworker": e.AuditWorkerURL,
	}
}

// Client is the HTTP client of the tests: bounded, loopback only.
var Client = &http.Client{Timeout: 30 * time.Second}

// Response is an answer read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request and reads the whole answer.
func Do(tb testing.TB, method, url, bearer string, body []byte, header map[string]string) Response {
	tb.Helper()
	r, err := TryDo(method, url, bearer, body, header)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// TryDo is Do returning the transport error instead of failing.
func TryDo(method, url, bearer string, body []byte, header map[string]string) (Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return Response{}, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := Client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// ErrorBody is the JSON error every service answers with.
type ErrorBody struct {
	Error struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
}

// CheckError checks that r has the given status and the JSON error body
// {"error":{"code","message"}}, and returns the body.
func CheckError(tb testing.TB, what string, r Response, status int) ErrorBody {
	tb.Helper()
	var eb ErrorBody
	if r.Status != status {
		tb.Errorf("%s: status %d, want %d (body %.300s)", what, r.Status, status, r.Body)
		return eb
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Errorf("%s: Content-Type %q, want application/json", what, ct)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		tb.Errorf("%s: body %.300q is not the JSON error body: %v", what, r.Body, err)
		return eb
	}
	if eb.Error.Code == "" || eb.Error.Message == "" {
		tb.Errorf("%s: error body %s lacks code or message", what, r.Body)
	}
	return eb
}

// App is an app of its own with a fresh token, so a test can count exactly
// what it stored.
type App struct {
	ID      string
	Token   string
	TokenID string
}

// NewApp creates a token for a fresh app id with the given prefix through
// the tokens admin API, retrying for a while when the service answers 503
// (its audit logger is briefly unavailable).
func NewApp(tb testing.TB, env Env, prefix string) App {
	tb.Helper()
	id := Name(prefix)
	body, _ := json.Marshal(map[string]string{"app_id": id, "name": "e2e " + tb.Name()})
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := TryDo(http.MethodPost, env.TokensURL+"/v1/tokens", env.AdminKey, body, nil)
		if err == nil && r.Status == http.StatusCreated {
			var out struct {
				ID    string `json:"id"`
				Token string `json:"token"`
				AppID string `json:"app_id"`
			}
			if err := json.Unmarshal(r.Body, &out); err != nil || out.Token == "" || out.AppID != id {
				tb.Fatalf("create token: answer %s: %v", r.Body, err)
			}
			return App{ID: id, Token: out.Token, TokenID: out.ID}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("create token for %s: %v %d %s", id, err, r.Status, r.Body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Name returns prefix-<random hex>, a valid app id or request id.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// UUID returns a random version 4 UUID.
func UUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// GoodEvent returns a valid single-event body for app with the given event id.
func GoodEvent(app, eventID string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type":     "app.startup",
		"event_id": eventID,
		"app":      map[string]string{"id": app, "version": "1.0.0"},
		"device": map[string]string{
			"id": "e2e-device", "model": "Pixel 8", "manufacturer": "Google", "os": "android", "os_version": "14",
		},
		"threats":    []string{},
		"attributes": map[string]any{"e2e": true},
	})
	return b
}

// Events opens a pool on the events DB, closed when the test ends.
func Events(tb testing.TB, env Env) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, env.EventsURL)
	if err != nil {
		tb.Fatalf("open events DB: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// MariaDB opens a go-sql-driver DSN with times in UTC, closed when the test
// ends.
func MariaDB(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatalf("parse DSN: %v", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("MariaDB connector: %v", err)
	}
	db := sql.OpenDB(conn)
	tb.Cleanup(func() { db.Close() })
	return db
}

// StoredCounts returns, for app, every stored event id with how many rows
// it has, looking at events received since since.
func StoredCounts(ctx context.Context, pool *pgxpool.Pool, app string, since time.Time) (map[string]int, error) {
	rows, err := pool.Query(ctx, `SELECT id::text, count(*) FROM events.events
		WHERE app_id = $1 AND received_at >= $2 GROUP BY id`, app, since)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// AuditCounts returns, for app, the events.collect audit rows with outcome
// 202 since since, counted per request id.
func AuditCounts(ctx context.Context, db *sql.DB, app string, since time.Time) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT request_id, count(*) FROM audit_events
		WHERE actor_app_id = ? AND action = 'events.collect' AND outcome = 202 AND time >= ?
		GROUP BY request_id`, app, since.UTC())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var rid string
		var n int
		if err := rows.Scan(&rid, &n); err != nil {
			return nil, err
		}
		out[rid] = n
	}
	return out, rows.Err()
}

// WaitFor polls cond every 200 ms until it returns true or d has passed; it
// returns the last error cond reported, if any, when time runs out.
func WaitFor(d time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(d)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			if last == nil {
				last = fmt.Errorf("not done after %s", d)
			}
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Healthy checks that every service answers /healthz and /readyz with 200.
func Healthy(tb testing.TB, env Env) {
	tb.Helper()
	for name, u := range env.ServiceURLs() {
		for _, p := range []string{"/healthz", "/readyz"} {
			r, err := TryDo(http.MethodGet, u+p, "", nil, nil)
			if err != nil || r.Status != http.StatusOK {
				tb.Errorf("%s %s: %v %d %.200s", name, p, err, r.Status, r.Body)
			}
		}
	}
}
