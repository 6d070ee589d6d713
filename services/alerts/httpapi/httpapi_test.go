package httpapi_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/alerts/httpapi"
	"threatview/alerts/internal/pgtest"
	"threatview/platform/auditclient"
	"threatview/platform/authz"
	"threatview/platform/testenv"
)

type api struct {
	t       *testing.T
	srv     *httptest.Server
	admin   string
	analyst string
}

func (a api) do(method, path, bearer, body string) (int, string) {
	a.t.Helper()
	code, _, b := a.doH(method, path, bearer, body)
	return code, b
}

// doH is do that also returns the answer's headers.
func (a api) doH(method, path, bearer, body string) (int, http.Header, string) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// newAPI serves the API on a fresh database, auditing to auditURL (the
// local stack's audit logger, or a dead address).
func newAPI(t *testing.T, auditURL string) api {
	aud := auditclient.New(auditURL, testenv.MustEnv(t, "INTERNAL_KEY"), auditclient.Options{Timeout: 2 * time.Second})
	return newAPIWith(t, aud, httpapi.Destinations{S3Buckets: []string{"siem-bucket"}})
}

// newAPIWith serves the API on a fresh database with aud and dest.
func newAPIWith(t *testing.T, aud httpapi.Auditor, dest httpapi.Destinations) api {
	_, st, _ := pgtest.MustStore(t)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	v := authz.NewVerifier(authz.StaticKeys{authz.KeyID(pub): pub})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := httpapi.New(st, authz.New(v, "admin-key", log), aud, dest, prometheus.NewRegistry(), nil, log)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	analyst, err := authz.Sign(priv, "ana", []string{authz.RoleAnalyst}, time.Now(), time.Hour, "j1")
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := authz.Sign(priv, "alice", []string{authz.RoleAdmin}, time.Now(), time.Hour, "j2")
	return api{t: t, srv: srv, admin: admin, analyst: analyst}
}

const goodRule = `{"name":"hooking spike","app_id":"demo-app","threat":"hooking","window_seconds":300,"threshold":50,
	"channel":{"type":"webhook","url":"https://hooks.example.com/x","secret":"s3cret-s3cret-s3cret-s3cret-s3cret"}}`

func TestAPI_Rules(t *testing.T) {
	a := newAPI(t, testenv.MustEnv(t, "THREATVIEW_AUDIT_URL"))
	t.Run("OK", func(t *testing.T) {
		code, body := a.do("POST", "/v1/alert-rules", a.admin, goodRule)
		if code != http.StatusCreated || strings.Contains(body, "s3cret") {
			t.Fatalf("POST = %d %s, want 201 without the secret", code, body)
		}
		var r struct {
			ID        string `json:"id"`
			CreatedBy string `json:"created_by"`
			State     string `json:"state"`
		}
		_ = json.Unmarshal([]byte(body), &r)
		if r.CreatedBy != "alice" || r.State != "ok" {
			t.Fatalf("rule %s", body)
		}
		// Country and OS are normalised (upper, lower case) and shown.
		code, body = a.do("POST", "/v1/alert-rules", a.admin, strings.Replace(goodRule, `"threat"`, `"country":"de","os":"Android","threat"`, 1))
		var scoped struct{ ID, Country, OS string }
		if _ = json.Unmarshal([]byte(body), &scoped); code != http.StatusCreated || scoped.Country != "DE" || scoped.OS != "android" {
			t.Fatalf("POST a scoped rule = %d %s, want 201 with country DE and os android", code, body)
		}
		if code, body = a.do("GET", "/v1/alert-rules/"+scoped.ID, a.analyst, ""); code != http.StatusOK || !strings.Contains(body, `"country":"DE","os":"android"`) {
			t.Fatalf("GET the scoped rule = %d %s", code, body)
		}
		if code, _ = a.do("DELETE", "/v1/alert-rules/"+scoped.ID, a.admin, ""); code != http.StatusNoContent {
			t.Fatalf("DELETE the scoped rule = %d", code)
		}
		code, body = a.do("GET", "/v1/alert-rules", a.analyst, "")
		if code != http.StatusOK || !strings.Contains(body, r.ID) || strings.Contains(body, "s3cret") {
			t.Fatalf("GET as analyst = %d %s", code, body)
		}
		if code, body = a.do("GET", "/v1/alert-rules/"+r.ID+"/history", a.analyst, ""); code != http.StatusOK {
			t.Fatalf("history = %d %s", code, body)
		}
		if code, _ = a.do("PUT", "/v1/alert-rules/"+r.ID+"/silence", a.admin,
			`{"until":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`); code != http.StatusOK {
			t.Fatalf("silence = %d", code)
		}
		if code, _ = a.do("DELETE", "/v1/alert-rules/"+r.ID, a.admin, ""); code != http.StatusNoContent {
			t.Fatalf("DELETE = %d", code)
		}
		if code, _ = a.do("DELETE", "/v1/alert-rules/"+r.ID, a.admin, ""); code != http.StatusNotFound {
			t.Fatalf("second DELETE = %d, want 404", code)
		}
	})
	t.Run("ErrRoles", func(t *testing.T) {
		if code, _ := a.do("POST", "/v1/alert-rules", a.analyst, goodRule); code != http.StatusForbidden {
			t.Fatalf("POST as analyst = %d, want 403", code)
		}
		if code, _ := a.do("GET", "/v1/alert-rules", "", ""); code != http.StatusUnauthorized {
			t.Fatalf("GET without credentials = %d, want 401", code)
		}
		if code, _ := a.do("GET", "/v1/forwarders", "admin-key", ""); code != http.StatusOK {
			t.Fatalf("GET with the admin key = %d, want 200", code)
		}
	})
	t.Run("ErrBadInput", func(t *testing.T) {
		for _, c := range []struct {
			body string
			want int
		}{
			{`{"name":"x","window_seconds":30,"threshold":5,"channel":{"type":"webhook","url":"https://a.example"}}`, 422},
			{`{"name":"x","window_seconds":300,"threshold":0,"channel":{"type":"webhook","url":"https://a.example"}}`, 422},
			{`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"webhook","url":"ftp://a.example"}}`, 422},
			{`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"email","to":"not an address"}}`, 422},
			{`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"pager"}}`, 422},
			{`{"name":"x","window_seconds":300,"threshold":5,"kind":"baseline","channel":{"type":"slack","url":"https://a.example"}}`, 422},
			{`{"name":"x","bogus":1}`, 422},
			{`{"name":"x","country":"XX","window_seconds":300,"threshold":5,"channel":{"type":"slack","url":"https://a.example"}}`, 422},
			{`{"name":"x","country":"DEU","window_seconds":300,"threshold":5,"channel":{"type":"slack","url":"https://a.example"}}`, 422},
			{`{"name":"x","country":"D\u00e9","window_seconds":300,"threshold":5,"channel":{"type":"slack","url":"https://a.example"}}`, 422},
			{`{"name":"x","os":"symbian","window_seconds":300,"threshold":5,"channel":{"type":"slack","url":"https://a.example"}}`, 422},
			{`{"name":"x","os":["android"],"window_seconds":300,"threshold":5,"channel":{"type":"slack","url":"https://a.example"}}`, 422},
			{`{"name":"x\r\nBcc: someone@example.com","window_seconds":300,"threshold":5,"channel":{"type":"email","to":"a@b.example"}}`, 422},
			{`{"name":`, 400},
			{`[1]`, 400},
			{`{"name":"` + strings.Repeat("x", 200<<10) + `"}`, 413},
		} {
			code, body := a.do("POST", "/v1/alert-rules", a.admin, c.body)
			if code != c.want || !strings.Contains(body, `"error":{"code"`) {
				t.Errorf("POST %.60s = %d %s, want %d with the error body", c.body, code, body, c.want)
			}
		}
		for _, c := range []string{
			`{"name":"f","type":"syslog","url":"udp://1.2.3.4:514","format":"cef"}`,
			`{"name":"f","type":"http","url":"https://siem.example","format":"cef"}`,
			`{"name":"f","type":"syslog","url":"tls://siem.example:6514","format":"cef","ca_pem":"not pem"}`,
			`{"name":"f","type":"kafka","url":"x","format":"ocsf"}`,
		} {
			if code, body := a.do("POST", "/v1/forwarders", a.admin, c); code != 422 {
				t.Errorf("POST forwarder %s = %d %s, want 422", c, code, body)
			}
		}
		if code, _ := a.do("GET", "/v1/alert-rules/not-a-uuid/history", a.admin, ""); code != 404 {
			t.Errorf("history of a bad id = %d, want 404", code)
		}
		if _, body := a.do("GET", "/v1/alert-rules", a.admin, ""); strings.Count(body, `"id"`) != 0 {
			t.Errorf("bad input stored something: %s", body)
		}
	})
}

// TestAPI_AuditDown: a change that cannot be audited is refused with 503
// and Retry-After (as api/alerts.openapi.json promises), and not made.
func TestAPI_AuditDown(t *testing.T) {
	a := newAPI(t, "http://127.0.0.1:1")
	code, h, body := a.doH("POST", "/v1/alert-rules", a.admin, goodRule)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"unavailable"`) {
		t.Fatalf("POST with the audit logger down = %d %s, want 503", code, body)
	}
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra <= 0 {
		t.Fatalf("503 Retry-After = %q, want a positive number of seconds", h.Get("Retry-After"))
	}
	if _, body := a.do("GET", "/v1/alert-rules", a.admin, ""); !bytes.Contains([]byte(body), []byte(`"rules":[]`)) {
		t.Fatalf("rules after a refused change = %s, want none", body)
	}
	if code, h, _ := a.doH("POST", "/v1/forwarders", a.admin, `{"name":"f","type":"syslog","url":"tcp://93.184.215.14:514","format":"cef"}`); code != 503 || h.Get("Retry-After") == "" {
		t.Fatalf("POST forwarder with the audit logger down = %d (Retry-After %q), want 503 with Retry-After", code, h.Get("Retry-After"))
	}
}
