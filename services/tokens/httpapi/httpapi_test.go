package httpapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/migrations"
	"threatview/platform/auditclient"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/tokens"
	"threatview/tokens/httpapi"
	"threatview/tokens/mariadb"
)

const (
	adminKey    = "test-admin-key"
	internalKey = "test-internal-key"
)

type env struct {
	url string
	db  *sql.DB
	svc *tokens.Service
}

// newEnv serves the real handler on a fresh, migrated MariaDB database.
// auditURL may be blank (auditing off).
func newEnv(t *testing.T, auditURL string) *env {
	t.Helper()
	return newEnvAnnouncing(t, auditURL, nil)
}

// newEnvAnnouncing is newEnv with revocations announced through announce
// (nil: not announced).
func newEnvAnnouncing(t *testing.T, auditURL string, announce tokens.Announcer) *env {
	t.Helper()
	db, err := mariadb.Open(testenv.MustMariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := migrations.Up(ctx, db, migrations.Tokens); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	store := mariadb.New(db)
	var auditor tokens.Auditor
	if auditURL != "" {
		auditor = auditclient.New(auditURL, internalKey, auditclient.Options{Timeout: 2 * time.Second, Unavailable: tokens.ErrAuditUnavailable})
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := tokens.NewService(store, auditor, announce, time.Hour, log)
	h := httpapi.New(svc, httpapi.Keys{Admin: adminKey, Internal: internalKey}, httpserver.NewRegistry(),
		map[string]httpserver.Check{"database": store.Ping}, log)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{url: srv.URL, db: db, svc: svc}
}

// do sends a request and returns the status and raw body.
func (e *env) do(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

type created struct {
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	AppID     string    `json:"app_id"`
	Name      string    `json:"name"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
}

func (e *env) create(t *testing.T, appID, name string) created {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"app_id": appID, "name": name})
	status, raw := e.do(t, http.MethodPost, "/v1/tokens", adminKey, string(body))
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/tokens = %d %s, want 201", status, raw)
	}
	var c created
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return c
}

type introspection struct {
	Active  bool   `json:"active"`
	TokenID string `json:"token_id"`
	AppID   string `json:"app_id"`
}

func (e *env) introspect(t *testing.T, token string) (introspection, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"token": token})
	status, raw := e.do(t, http.MethodPost, "/v1/introspect", internalKey, string(body))
	if status != http.StatusOK {
		t.Fatalf("POST /v1/introspect = %d %s, want 200", status, raw)
	}
	var in introspection
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return in, raw
}

// wantError checks the standard JSON error body and returns its code.
func wantError(t *testing.T, what string, status, wantStatus int, raw []byte) string {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("%s = %d %s, want %d", what, status, raw, wantStatus)
	}
	var eb httpserver.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("%s body = %s, want {\"error\":{\"code\",\"message\"}} (%v)", what, raw, err)
	}
	return eb.Error.Code
}

func TestAPI_Lifecycle(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, "demo-app", "ci")
	if !tokens.WellFormed(c.Token) || c.AppID != "demo-app" || c.Name != "ci" || !c.Active || c.CreatedAt.IsZero() {
		t.Fatalf("created = %+v, want an active well-formed token for demo-app", c)
	}
	if _, err := tokens.ParseID(c.ID); err != nil {
		t.Fatalf("created id %q: %v", c.ID, err)
	}

	in, _ := e.introspect(t, c.Token)
	if want := (introspection{Active: true, TokenID: c.ID, AppID: "demo-app"}); in != want {
		t.Fatalf("introspect = %+v, want %+v", in, want)
	}

	status, raw := e.do(t, http.MethodGet, "/v1/tokens/"+c.ID, adminKey, "")
	if status != http.StatusOK || !bytes.Contains(raw, []byte(`"active":true`)) {
		t.Fatalf("GET /v1/tokens/%s = %d %s, want 200 and active", c.ID, status, raw)
	}

	status, raw = e.do(t, http.MethodDelete, "/v1/tokens/"+c.ID, adminKey, "")
	if status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s, want 204", status, raw)
	}
	in, raw = e.introspect(t, c.Token)
	if in.Active || strings.TrimSpace(string(raw)) != `{"active":false}` {
		t.Fatalf("introspect after revoke = %s, want {\"active\":false}", raw)
	}

	// Revoking again is a no-op that keeps the first revocation time.
	var before struct {
		RevokedAt *time.Time `json:"revoked_at"`
		Active    bool       `json:"active"`
	}
	_, raw = e.do(t, http.MethodGet, "/v1/tokens/"+c.ID, adminKey, "")
	if err := json.Unmarshal(raw, &before); err != nil || before.RevokedAt == nil || before.Active {
		t.Fatalf("GET after revoke = %s, want revoked_at set and active false", raw)
	}
	if status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+c.ID, adminKey, ""); status != http.StatusNoContent {
		t.Fatalf("second DELETE = %d %s, want 204", status, raw)
	}
	var after struct {
		RevokedAt *time.Time `json:"revoked_at"`
	}
	_, raw = e.do(t, http.MethodGet, "/v1/tokens/"+c.ID, adminKey, "")
	if err := json.Unmarshal(raw, &after); err != nil || after.RevokedAt == nil || !after.RevokedAt.Equal(*before.RevokedAt) {
		t.Fatalf("revoked_at after second DELETE = %v, want %v", after.RevokedAt, before.RevokedAt)
	}

	// Another token of the same app is unaffected.
	other := e.create(t, "demo-app", "")
	if in, _ := e.introspect(t, other.Token); !in.Active || in.TokenID != other.ID {
		t.Fatalf("introspect other token = %+v, want active %s", in, other.ID)
	}
}

func TestAPI_IntrospectInactive(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, "demo-app", "")
	unknown, _, _ := tokens.NewPlain()
	tests := []struct{ name, token string }{
		{"Unknown", unknown},
		{"Empty", ""},
		{"Malformed", "tvk_short"},
		{"HashInsteadOfToken", hex.EncodeToString(func() []byte { h := tokens.HashPlain(c.Token); return h[:] }())},
		{"TokenWithSuffix", c.Token + "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if in, raw := e.introspect(t, tt.token); in.Active {
				t.Fatalf("introspect(%q) = %s, want inactive", tt.token, raw)
			}
		})
	}
}

func TestAPI_ListNeverShowsSecrets(t *testing.T) {
	e := newEnv(t, "")
	var made []created
	for i := 0; i < 3; i++ {
		made = append(made, e.create(t, "app-a", "n"))
	}
	other := e.create(t, "app-b", "n")

	for _, path := range []string{"/v1/tokens", "/v1/tokens?app_id=app-a", "/v1/tokens/" + made[0].ID} {
		status, raw := e.do(t, http.MethodGet, path, adminKey, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, status, raw)
		}
		for _, c := range append(made, other) {
			h := tokens.HashPlain(c.Token)
			secret := c.Token[len(tokens.Prefix):]
			for _, s := range []string{
				c.Token, secret,
				hex.EncodeToString(h[:]), strings.ToUpper(hex.EncodeToString(h[:])),
				base64.StdEncoding.EncodeToString(h[:]), base64.RawURLEncoding.EncodeToString(h[:]),
				base64.RawStdEncoding.EncodeToString(h[:]), base64.URLEncoding.EncodeToString(h[:]),
			} {
				if bytes.Contains(raw, []byte(s)) {
					t.Fatalf("GET %s shows a secret or hash %q: %s", path, s, raw)
				}
			}
		}
		if bytes.Contains(raw, []byte(`"token"`)) || bytes.Contains(raw, []byte("hash")) {
			t.Fatalf("GET %s has a token or hash field: %s", path, raw)
		}
	}

	var list struct {
		Tokens []struct {
			ID    string `json:"id"`
			AppID string `json:"app_id"`
		} `json:"tokens"`
	}
	_, raw := e.do(t, http.MethodGet, "/v1/tokens?app_id=app-a", adminKey, "")
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Tokens) != 3 {
		t.Fatalf("list app-a has %d tokens, want 3: %s", len(list.Tokens), raw)
	}
	for _, tk := range list.Tokens {
		if tk.AppID != "app-a" {
			t.Fatalf("list app-a holds a token of %q", tk.AppID)
		}
	}
	_, raw = e.do(t, http.MethodGet, "/v1/tokens?limit=2", adminKey, "")
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Tokens) != 2 {
		t.Fatalf("list limit=2 = %s, want 2 tokens", raw)
	}
	_, raw = e.do(t, http.MethodGet, "/v1/tokens?app_id=nobody", adminKey, "")
	if strings.TrimSpace(string(raw)) != `{"tokens":[]}` {
		t.Fatalf("list of an app without tokens = %s, want {\"tokens\":[]}", raw)
	}
}

func TestAPI_Auth(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, "demo-app", "")
	admin := []struct{ method, path, body string }{
		{http.MethodPost, "/v1/tokens", `{"app_id":"x"}`},
		{http.MethodGet, "/v1/tokens", ""},
		{http.MethodGet, "/v1/tokens/" + c.ID, ""},
		{http.MethodDelete, "/v1/tokens/" + c.ID, ""},
	}
	for _, key := range []struct{ name, key string }{
		{"Missing", ""}, {"Wrong", "nope"}, {"InternalKey", internalKey}, {"AppToken", c.Token},
		{"AdminKeyPrefix", adminKey[:len(adminKey)-1]},
	} {
		for _, r := range admin {
			t.Run(key.name+r.method+r.path, func(t *testing.T) {
				status, raw := e.do(t, r.method, r.path, key.key, r.body)
				if code := wantError(t, r.method+" "+r.path, status, http.StatusUnauthorized, raw); code != "unauthorized" {
					t.Fatalf("code = %q, want unauthorized", code)
				}
			})
		}
	}
	for _, key := range []struct{ name, key string }{
		{"Missing", ""}, {"Wrong", "nope"}, {"AdminKey", adminKey}, {"AppToken", c.Token},
	} {
		t.Run("Introspect"+key.name, func(t *testing.T) {
			status, raw := e.do(t, http.MethodPost, "/v1/introspect", key.key, `{"token":"`+c.Token+`"}`)
			wantError(t, "introspect", status, http.StatusUnauthorized, raw)
			if bytes.Contains(raw, []byte(c.ID)) {
				t.Fatalf("refused introspection leaks the token id: %s", raw)
			}
		})
	}
	// Refused calls changed nothing: the token is still active.
	if in, _ := e.introspect(t, c.Token); !in.Active {
		t.Fatal("token inactive after refused DELETE calls")
	}
	// A scheme other than Bearer is refused too.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/tokens", nil)
	req.Header.Set("Authorization", "Basic "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Basic auth = %d, want 401", resp.StatusCode)
	}
}

func TestAPI_BadRequests(t *testing.T) {
	e := newEnv(t, "")
	tests := []struct {
		name, method, path, key, body string
		status                        int
		code                          string
	}{
		{"MalformedIDGet", http.MethodGet, "/v1/tokens/not-a-uuid", adminKey, "", 400, "malformed"},
		{"MalformedIDDelete", http.MethodDelete, "/v1/tokens/123", adminKey, "", 400, "malformed"},
		{"MalformedIDLong", http.MethodDelete, "/v1/tokens/" + strings.Repeat("a", 300), adminKey, "", 400, "malformed"},
		{"UnknownIDGet", http.MethodGet, "/v1/tokens/0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5b6a", adminKey, "", 404, "not_found"},
		{"UnknownIDDelete", http.MethodDelete, "/v1/tokens/0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5b6a", adminKey, "", 404, "not_found"},
		{"NotJSON", http.MethodPost, "/v1/tokens", adminKey, "app_id=x", 400, "invalid_json"},
		{"TruncatedJSON", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"x"`, 400, "invalid_json"},
		{"TwoObjects", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"x"}{"app_id":"y"}`, 400, "invalid_json"},
		{"Array", http.MethodPost, "/v1/tokens", adminKey, `[]`, 400, "invalid_json"},
		{"UnknownField", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"x","scope":"all"}`, 422, "unknown_field"},
		{"WrongType", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":7}`, 422, "invalid"},
		{"MissingAppID", http.MethodPost, "/v1/tokens", adminKey, `{"name":"x"}`, 422, "invalid"},
		{"BadAppID", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"a b"}`, 422, "invalid"},
		{"LongAppID", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"` + strings.Repeat("a", 129) + `"}`, 422, "invalid"},
		{"LongName", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"a","name":"` + strings.Repeat("n", 201) + `"}`, 422, "invalid"},
		{"HugeBody", http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"a","name":"` + strings.Repeat("n", 20000) + `"}`, 413, "too_large"},
		{"ListBadApp", http.MethodGet, "/v1/tokens?app_id=a%20b", adminKey, "", 422, "invalid"},
		{"ListBadLimit", http.MethodGet, "/v1/tokens?limit=0", adminKey, "", 400, "invalid_query"},
		{"ListUnknownParam", http.MethodGet, "/v1/tokens?app=x", adminKey, "", 400, "invalid_query"},
		{"IntrospectUnknownField", http.MethodPost, "/v1/introspect", internalKey, `{"token":"x","app_id":"y"}`, 422, "unknown_field"},
		{"IntrospectNotJSON", http.MethodPost, "/v1/introspect", internalKey, `token`, 400, "invalid_json"},
		{"UnknownRoute", http.MethodGet, "/v1/nothing", adminKey, "", 404, "not_found"},
		{"WrongMethod", http.MethodPut, "/v1/tokens", adminKey, "", 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := e.do(t, tt.method, tt.path, tt.key, tt.body)
			if code := wantError(t, tt.name, status, tt.status, raw); code != tt.code {
				t.Fatalf("%s: code = %q, want %q (%s)", tt.name, code, tt.code, raw)
			}
		})
	}
	// None of the refused creations made a token.
	_, raw := e.do(t, http.MethodGet, "/v1/tokens", adminKey, "")
	if strings.TrimSpace(string(raw)) != `{"tokens":[]}` {
		t.Fatalf("tokens after bad requests = %s, want none", raw)
	}
}

func TestAPI_Ops(t *testing.T) {
	e := newEnv(t, "")
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, raw := e.do(t, http.MethodGet, p, "", ""); status != http.StatusOK {
			t.Fatalf("GET %s = %d %s, want 200", p, status, raw)
		}
	}
	e.create(t, "demo-app", "")
	_, raw := e.do(t, http.MethodGet, "/metrics", "", "")
	if !bytes.Contains(raw, []byte(`tokens_changes_total{action="tokens.create",result="ok"} 1`)) {
		t.Fatalf("metrics lack the creation counter:\n%s", raw)
	}
	e.db.Close() // the store is gone: /readyz says so, /healthz does not care
	if status, raw := e.do(t, http.MethodGet, "/readyz", "", ""); status != http.StatusServiceUnavailable || !bytes.Contains(raw, []byte("database")) {
		t.Fatalf("GET /readyz with the database closed = %d %s, want 503 naming database", status, raw)
	}
	if status, _ := e.do(t, http.MethodGet, "/healthz", "", ""); status != http.StatusOK {
		t.Fatalf("GET /healthz with the database closed = %d, want 200", status)
	}
}

func TestService_LastUsed(t *testing.T) {
	e := newEnv(t, "")
	c := e.create(t, "demo-app", "")
	lastUsed := func() *time.Time {
		var at sql.NullTime
		if err := e.db.QueryRow("SELECT last_used_at FROM tokens WHERE id = ?", c.ID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if !at.Valid {
			return nil
		}
		return &at.Time
	}
	if lastUsed() != nil {
		t.Fatal("last_used_at set before any use")
	}
	e.introspect(t, c.Token)
	if lastUsed() != nil {
		t.Fatal("last_used_at written on the request path; want it written by the flush")
	}
	e.svc.FlushLastUsed(context.Background())
	first := lastUsed()
	if first == nil {
		t.Fatal("last_used_at not set after a use and a flush")
	}
	// Within the interval (an hour here) further uses write nothing.
	e.introspect(t, c.Token)
	e.svc.FlushLastUsed(context.Background())
	if got := lastUsed(); got == nil || !got.Equal(*first) {
		t.Fatalf("last_used_at = %v after a second use within the interval, want %v", got, first)
	}
}

// fakeAudit is an HTTP audit logger that records what it receives and can
// be switched to failing.
type fakeAudit struct {
	mu      sync.Mutex
	down    bool
	records []wire.AuditRecord
	auth    []string
}

func (f *fakeAudit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path != "/v1/audit" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if f.down {
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "broker down", nil)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	b, err := wire.DecodeAuditBatch(raw)
	if err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid", err.Error(), nil)
		return
	}
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.records = append(f.records, b.Records...)
	w.WriteHeader(http.StatusAccepted)
}

func (f *fakeAudit) setDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }

func (f *fakeAudit) snapshot() ([]wire.AuditRecord, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.AuditRecord(nil), f.records...), append([]string(nil), f.auth...)
}

func TestAPI_Audit(t *testing.T) {
	fa := &fakeAudit{}
	audit := httptest.NewServer(fa)
	defer audit.Close()
	e := newEnv(t, audit.URL)

	t.Run("CreateAndRevoke", func(t *testing.T) {
		c := e.create(t, "demo-app", "ci")
		if status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+c.ID, adminKey, ""); status != http.StatusNoContent {
			t.Fatalf("DELETE = %d %s", status, raw)
		}
		recs, auth := fa.snapshot()
		if len(recs) != 2 || recs[0].Action != tokens.ActionCreate || recs[1].Action != tokens.ActionRevoke {
			t.Fatalf("audit records = %+v, want create then revoke", recs)
		}
		for i, r := range recs {
			if r.Resource != "token:"+c.ID || auth[i] != "Bearer "+internalKey {
				t.Fatalf("record %d = %+v with %q, want resource token:%s and the internal key", i, r, auth[i], c.ID)
			}
			if bytes.Contains(r.Body, []byte(c.Token)) || bytes.Contains(r.Body, []byte(c.Token[len(tokens.Prefix):])) {
				t.Fatalf("audit record %d carries the plain token", i)
			}
		}
		if recs[0].Outcome != 201 || recs[1].Outcome != 204 {
			t.Fatalf("outcomes = %d, %d, want 201, 204", recs[0].Outcome, recs[1].Outcome)
		}
	})

	t.Run("CreateFailsWhenAuditDown", func(t *testing.T) {
		fa.setDown(true)
		defer fa.setDown(false)
		status, raw := e.do(t, http.MethodPost, "/v1/tokens", adminKey, `{"app_id":"unaudited"}`)
		wantError(t, "create with audit down", status, http.StatusServiceUnavailable, raw)
		if bytes.Contains(raw, []byte(tokens.Prefix)) {
			t.Fatalf("refused creation shows a token: %s", raw)
		}
		_, raw = e.do(t, http.MethodGet, "/v1/tokens?app_id=unaudited", adminKey, "")
		if strings.TrimSpace(string(raw)) != `{"tokens":[]}` {
			t.Fatalf("tokens of unaudited = %s, want none (creation rolled back)", raw)
		}
	})

	t.Run("RevokeWhenAuditDown", func(t *testing.T) {
		c := e.create(t, "demo-app", "")
		fa.setDown(true)
		status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+c.ID, adminKey, "")
		fa.setDown(false)
		if code := wantError(t, "revoke with audit down", status, http.StatusServiceUnavailable, raw); code != "audit_unavailable" {
			t.Fatalf("code = %q, want audit_unavailable", code)
		}
		// The revocation took effect anyway.
		if in, _ := e.introspect(t, c.Token); in.Active {
			t.Fatal("token active after a revocation whose audit failed")
		}
		// Repeating it records the audit; repeating once more sends the same
		// record id, which the audit log stores once.
		for i := 0; i < 2; i++ {
			if status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+c.ID, adminKey, ""); status != http.StatusNoContent {
				t.Fatalf("repeated DELETE = %d %s, want 204", status, raw)
			}
		}
		recs, _ := fa.snapshot()
		var ids []string
		for _, r := range recs {
			if r.Action == tokens.ActionRevoke && r.Resource == "token:"+c.ID {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) != 2 || ids[0] != ids[1] {
			t.Fatalf("revoke record ids = %v, want the same id twice", ids)
		}
	})
}
