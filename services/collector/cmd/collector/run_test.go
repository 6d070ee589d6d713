package main

// Integration tests: the collector as run() starts it, against the real
// ActiveMQ (a unique queue per test) and the real tokens service of the
// local stack (THREATVIEW_TOKENS_URL, tokens created with the admin key).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/collector/geoip"
	"threatview/collector/geoip/testdb"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

type stack struct {
	broker    mq.Config
	queue     string
	tokensURL string
	adminKey  string
	internal  string
	geoipPath string
}

func mustStack(t *testing.T) stack {
	t.Helper()
	s := stack{
		broker:    testenv.MustBroker(t),
		queue:     testenv.Queue("events"),
		tokensURL: testenv.MustEnv(t, "THREATVIEW_TOKENS_URL"),
		adminKey:  testenv.MustEnv(t, "ADMIN_KEY"),
		internal:  testenv.MustEnv(t, "INTERNAL_KEY"),
		geoipPath: filepath.Join(t.TempDir(), "test.mmdb"),
	}
	testenv.MustPing(t, 10*time.Second, "tokens service", func() error {
		resp, err := http.Get(s.tokensURL + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("healthz %d", resp.StatusCode)
		}
		return nil
	})
	if err := testdb.Write(s.geoipPath, nil); err != nil {
		t.Fatalf("write geoip db: %v", err)
	}
	return s
}

func (s stack) env(extra map[string]string) map[string]string {
	env := map[string]string{
		"HTTP_ADDR":                 "127.0.0.1:0",
		"STOMP_ADDR":                s.broker.Addr,
		"STOMP_LOGIN":               s.broker.Login,
		"STOMP_PASSCODE":            s.broker.Passcode,
		"STOMP_CONNS":               "2",
		"STOMP_RECEIPT_TIMEOUT":     "3s",
		"STOMP_DIAL_TIMEOUT":        "1s",
		"COLLECTOR_EVENTS_QUEUE":    s.queue,
		"COLLECTOR_PUBLISH_TIMEOUT": "3s",
		"TOKENS_SERVICE_URL":        s.tokensURL,
		"INTERNAL_KEY":              s.internal,
		"GEOIP_DB_PATH":             s.geoipPath,
		"COLLECTOR_TRUSTED_PROXIES": "127.0.0.1/32",
		"LOG_LEVEL":                 "debug",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// startCollector runs the service on a free port until the test ends.
func startCollector(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testenv.SyncBuffer{}
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, func(k string) string { return env[k] }, logs) }()
	deadline := time.Now().Add(15 * time.Second)
	addr := ""
	for addr == "" {
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("run = %v\n%s", err, logs)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("collector did not start")
		}
		addr = testenv.ListenAddr(logs.String())
	}
	base := "http://" + addr
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run returned %v", err)
		}
		if t.Failed() {
			t.Logf("collector log:\n%s", logs)
		}
	})
	return base
}

// newToken creates an app token at the real tokens service. Creation is
// audited there, so a 503 (audit chain busy) is retried for a while.
func (s stack) newToken(t *testing.T, app string) string {
	t.Helper()
	var token string
	testenv.MustPing(t, 15*time.Second, "token creation", func() error {
		body := fmt.Sprintf(`{"app_id":%q,"name":"collector-test"}`, app)
		req, _ := http.NewRequest(http.MethodPost, s.tokensURL+"/v1/tokens", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.adminKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var out struct {
			Token string `json:"token"`
		}
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &out) != nil || out.Token == "" {
			return fmt.Errorf("create token = %d %s", resp.StatusCode, raw)
		}
		token = out.Token
		return nil
	})
	return token
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func postEvents(t *testing.T, base, token, body string, header map[string]string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/events: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

func (r response) ids(t *testing.T) []string {
	t.Helper()
	var a struct {
		Accepted int      `json:"accepted"`
		IDs      []string `json:"ids"`
	}
	if r.status != http.StatusAccepted || json.Unmarshal(r.body, &a) != nil || a.Accepted != len(a.IDs) {
		t.Fatalf("response = %d %s, want 202 {accepted, ids}", r.status, r.body)
	}
	return a.IDs
}

func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("body %s is not the JSON error body", r.body)
	}
	return e.Error.Code
}

// consume reads messages from queue until want events arrived.
func consume(t *testing.T, cfg mq.Config, queue string, want int) []wire.EventBatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := mq.Subscribe(ctx, cfg, queue, 100, slog.New(slog.DiscardHandler))
	var out []wire.EventBatch
	got := 0
	timeout := time.After(20 * time.Second)
	for got < want {
		select {
		case d := <-sub.C():
			b, err := wire.DecodeEventBatch(d.Body)
			if err != nil {
				t.Fatalf("message %s: %v", d.Body, err)
			}
			if err := d.Ack(); err != nil {
				t.Fatalf("ack: %v", err)
			}
			out = append(out, b)
			got += len(b.Events)
		case <-timeout:
			t.Fatalf("got %d of %d events from %s", got, want, queue)
		}
	}
	return out
}

func event(app, extra string) string {
	return fmt.Sprintf(`{"type":"app.startup","app":{"id":%q,"version":"2.1"},"device":{"model":"Pixel 8","manufacturer":"Google","os":"android","os_version":"14"},"threats":[{"type":"root"}]%s}`, app, extra)
}

func TestRun_AcceptedBatchArrivesWhole(t *testing.T) {
	s := mustStack(t)
	base := startCollector(t, s.env(nil))
	app := testenv.Name("app")
	token := s.newToken(t, app)

	const clientID = "0190f0a8-1234-7abc-8def-0123456789ab"
	au := geoip.TestNetworks[0]
	body := `{"events":[` + event(app, `,"event_id":"`+clientID+`"`) + `,` + event(app, `,"occurred_at":"2026-01-01T00:00:00Z","sent_at":"2026-01-01T00:00:10Z"`) + `,` + event(app, "") + `]}`
	r := postEvents(t, base, token, body, map[string]string{"X-Forwarded-For": au.IP, "X-Request-ID": "it-1"})
	ids := r.ids(t)
	if len(ids) != 3 || ids[0] != clientID {
		t.Fatalf("ids = %v, want 3 with the client's first", ids)
	}

	msgs := consume(t, s.broker, s.queue, 3)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want the batch in one", len(msgs))
	}
	for i, ev := range msgs[0].Events {
		if ev.ID != ids[i] || ev.App.ID != app || ev.Country != au.Country || ev.ClientIP != "1.0.0.0" || ev.RequestID != "it-1" || ev.TokenID == "" || ev.ReceivedAt.IsZero() || ev.Device.Model != "Pixel 8" {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	for path, want := range map[string]string{
		"/readyz":         `"status":"ok"`,
		"/metrics":        "collector_events_accepted_total 3",
		"/metrics?places": "collector_location_cache_misses_total ",
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(raw), want) {
			t.Fatalf("GET %s = %d, want 200 containing %q:\n%.2000s", path, resp.StatusCode, want, raw)
		}
	}
	skewed := msgs[0].Events[1]
	if skewed.OriginalOccurredAt == nil || !skewed.OccurredAt.Equal(skewed.ReceivedAt.Add(-10*time.Second)) {
		t.Fatalf("skew-corrected occurred_at = %v (received %v, original %v)", skewed.OccurredAt, skewed.ReceivedAt, skewed.OriginalOccurredAt)
	}
}

func TestRun_ConcurrentRequestsShareMessages(t *testing.T) {
	s := mustStack(t)
	// The whole window at any rate: this test is about gathering, not about
	// the window's scaling with the arrival rate (a burst of 50 after a quiet
	// start would open its first messages with a near-zero window).
	base := startCollector(t, s.env(map[string]string{"COLLECTOR_COALESCE_WINDOW": "5ms", "COLLECTOR_COALESCE_FULL_RATE": "0"}))
	app := testenv.Name("app")
	token := s.newToken(t, app)
	postEvents(t, base, token, event(app, ""), nil).ids(t) // warm the token cache and a connection
	consume(t, s.broker, s.queue, 1)

	const n = 50
	var wg sync.WaitGroup
	idsOf := make([][]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := postEvents(t, base, token, `{"events":[`+event(app, "")+`,`+event(app, "")+`]}`, nil)
			if r.status != http.StatusAccepted {
				t.Errorf("request %d = %d %s", i, r.status, r.body)
				return
			}
			var a struct{ IDs []string }
			_ = json.Unmarshal(r.body, &a)
			idsOf[i] = a.IDs
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	msgs := consume(t, s.broker, s.queue, 2*n)
	if len(msgs) >= n {
		t.Fatalf("%d requests travelled in %d messages, want fewer messages than requests", n, len(msgs))
	}
	where := map[string]int{}
	for m, b := range msgs {
		for _, ev := range b.Events {
			where[ev.ID] = m
		}
	}
	for i, ids := range idsOf {
		m0, ok0 := where[ids[0]]
		m1, ok1 := where[ids[1]]
		if !ok0 || !ok1 || m0 != m1 {
			t.Fatalf("request %d: events in messages %d,%d (found %v,%v), want both in one", i, m0, m1, ok0, ok1)
		}
	}
	t.Logf("%d requests in %d messages", n, len(msgs))
}

func TestRun_BrokerDown(t *testing.T) {
	s := mustStack(t)
	base := startCollector(t, s.env(map[string]string{"STOMP_ADDR": "127.0.0.1:1"}))
	app := testenv.Name("app")
	token := s.newToken(t, app)
	r := postEvents(t, base, token, `{"events":[`+event(app, "")+`,`+event(app, "")+`]}`, nil)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("response = %d Retry-After %q, want 503 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
	if code := r.errorCode(t); code != "unavailable" {
		t.Fatalf("code = %s", code)
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d with the broker down, want 503", resp.StatusCode)
	}
}

func TestRun_ErrorStatuses(t *testing.T) {
	s := mustStack(t)
	base := startCollector(t, s.env(map[string]string{"COLLECTOR_RATE_LIMIT": "0.001", "COLLECTOR_RATE_BURST": "3"}))
	app := testenv.Name("app")
	token := s.newToken(t, app)
	other := s.newToken(t, testenv.Name("app"))
	third := s.newToken(t, testenv.Name("app"))
	unknown := "tvk_" + strings.Repeat("A", 43)

	tests := []struct {
		name   string
		token  string
		body   string
		header map[string]string
		status int
		code   string
	}{
		{"400", token, `{"type":`, nil, 400, "malformed_body"},
		{"401 unknown token", unknown, event(app, ""), nil, 401, "unauthorized"},
		{"401 no token", "", event(app, ""), nil, 401, "unauthorized"},
		{"403", other, event(app, ""), nil, 403, "forbidden"},
		{"413", other, `{"type":"t","app":{"id":"x"},"attributes":{"a":"` + strings.Repeat("x", 40<<10) + `"}}`, nil, 413, "too_large"},
		{"415", third, event(app, ""), map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"422", third, `{"type":"t","app":{"id":"x"},"nope":1}`, nil, 422, "invalid_event"},
		// The rate limit is per app; token's burst of 3 is spent by the
		// 400 above and these two.
		{"202 a", token, event(app, ""), nil, 202, ""},
		{"202 b", token, event(app, ""), nil, 202, ""},
		{"429", token, event(app, ""), nil, 429, "rate_limited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := postEvents(t, base, tt.token, tt.body, tt.header)
			if r.status != tt.status {
				t.Fatalf("status = %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.code != "" {
				if code := r.errorCode(t); code != tt.code {
					t.Fatalf("code = %s, want %s", code, tt.code)
				}
			}
			if tt.status == 429 && r.header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		})
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{{"GET", "/v1/nothing", 404}, {"GET", "/v1/events", 405}} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := response{status: resp.StatusCode, body: raw}
		if r.status != tc.status {
			t.Fatalf("%s %s = %d, want %d", tc.method, tc.path, r.status, tc.status)
		}
		r.errorCode(t)
	}
}

// auditStandIn records POST /v1/audit bodies. It stands in for the audit
// logger service, whose own tests cover storing the records.
type auditStandIn struct {
	mu      sync.Mutex
	batches []wire.AuditBatch
	keys    []string
	fail    bool
}

func (a *auditStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		http.Error(w, `{"error":{"code":"unavailable","message":"down"}}`, http.StatusServiceUnavailable)
		return
	}
	b, err := wire.DecodeAuditBatch(raw)
	if r.URL.Path != "/v1/audit" || err != nil {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	a.batches = append(a.batches, b)
	a.keys = append(a.keys, r.Header.Get("Authorization"))
	w.WriteHeader(http.StatusAccepted)
}

func TestRun_Audit(t *testing.T) {
	s := mustStack(t)
	standIn := &auditStandIn{}
	srv := httptest.NewServer(standIn)
	defer srv.Close()
	auditQueue := testenv.Queue("audit")
	base := startCollector(t, s.env(map[string]string{"AUDITLOGGER_SERVICE_URL": srv.URL, "COLLECTOR_AUDIT_QUEUE": auditQueue}))
	app := testenv.Name("app")
	token := s.newToken(t, app)

	t.Run("OK", func(t *testing.T) {
		// An accepted request's record travels with its events, in the
		// same broker transaction, to the audit queue.
		ids := postEvents(t, base, token, `{"events":[`+event(app, "")+`,`+event(app, "")+`]}`, map[string]string{"User-Agent": "it/1", "X-Request-ID": "audit-1"}).ids(t)
		consume(t, s.broker, s.queue, len(ids))
		msgs := drainQueue(t, s.broker, auditQueue, time.Second)
		if len(msgs) != 1 {
			t.Fatalf("%d audit messages, want 1", len(msgs))
		}
		b, err := wire.DecodeAuditBatch(msgs[0])
		if err != nil || len(b.Records) != 1 {
			t.Fatalf("audit message %s: %v, want one record", msgs[0], err)
		}
		rec := b.Records[0]
		if rec.ActorApp != app || rec.EventCount != 2 || rec.Outcome != 202 || rec.Action != "events.collect" || rec.RequestID != "audit-1" || rec.UserAgent != "it/1" || len(rec.BodySHA256) != 64 {
			t.Fatalf("record = %+v", rec)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		// Refused requests are audited best effort over the audit logger's
		// HTTP API, with the internal key.
		r := postEvents(t, base, "tvk_not-a-token", event(app, ""), map[string]string{"X-Request-ID": "audit-401"})
		if r.status != http.StatusUnauthorized {
			t.Fatalf("status = %d, want 401", r.status)
		}
		testenv.MustPing(t, 10*time.Second, "refusal record at the audit logger", func() error {
			standIn.mu.Lock()
			defer standIn.mu.Unlock()
			for i, b := range standIn.batches {
				for _, rec := range b.Records {
					if rec.RequestID == "audit-401" {
						if rec.Outcome != 401 || standIn.keys[i] != "Bearer "+s.internal {
							t.Fatalf("record = %+v with key ok=%v", rec, standIn.keys[i] == "Bearer "+s.internal)
						}
						return nil
					}
				}
			}
			return fmt.Errorf("no record among %d batches", len(standIn.batches))
		})
	})
}

func TestRun_Config(t *testing.T) {
	env := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "COLLECTOR_TRUSTED_PROXIES": "10.0.0.0/8"}
	err := run(context.Background(), func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "INTERNAL_KEY") {
		t.Fatalf("run without INTERNAL_KEY = %v, want an error naming it", err)
	}
	env["INTERNAL_KEY"] = "k"
	env["GEOIP_DB_PATH"] = filepath.Join(t.TempDir(), "missing.mmdb")
	err = run(context.Background(), func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "GEOIP_DB_PATH") {
		t.Fatalf("run with a missing GeoIP file = %v, want an error naming GEOIP_DB_PATH", err)
	}
}

// TestRun_AuditLogger checks that audit records reach the real audit logger
// and, through its worker, the audit trail.
func TestRun_AuditLogger(t *testing.T) {
	s := mustStack(t)
	auditURL := testenv.MustEnv(t, "THREATVIEW_AUDIT_URL")
	base := startCollector(t, s.env(map[string]string{"AUDITLOGGER_SERVICE_URL": auditURL}))
	app := testenv.Name("app")
	token := s.newToken(t, app)
	rid := testenv.Name("rid")
	ids := postEvents(t, base, token, `{"events":[`+event(app, "")+`,`+event(app, "")+`]}`, map[string]string{"X-Request-ID": rid}).ids(t)
	consume(t, s.broker, s.queue, len(ids))

	testenv.MustPing(t, 20*time.Second, "audit record in the trail", func() error {
		req, _ := http.NewRequest(http.MethodGet, auditURL+"/v1/audit?action=events.collect&app_id="+app, nil)
		req.Header.Set("Authorization", "Bearer "+s.adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var out struct {
			Records []wire.AuditRecord `json:"records"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return fmt.Errorf("GET /v1/audit = %d: %v", resp.StatusCode, err)
		}
		for _, r := range out.Records {
			if r.RequestID == rid {
				if r.ActorApp != app || r.EventCount != 2 || r.Outcome != 202 {
					t.Fatalf("audit record = %+v", r)
				}
				return nil
			}
		}
		return fmt.Errorf("no record with request id %s among %d", rid, len(out.Records))
	})
}
