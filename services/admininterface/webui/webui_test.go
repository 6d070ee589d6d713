package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/admininterface"
	"threatview/admininterface/upstream"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// fakeServices stands in for identity, tokens, the audit logger and the
// renderer (pure HTTP contract fakes; the browser test uses the real ones).
type fakeServices struct {
	mu        sync.Mutex
	users     map[string][]string // username → roles; password is "pw-" + username
	tokens    []upstream.NewToken
	audit     []wire.AuditRecord
	posted    []wire.AuditRecord
	refreshes int
	accessTTL time.Duration
	seenAuth  []string
	// extra answers first when it returns true (analyst_test.go's
	// investigation and people APIs).
	extra func(w http.ResponseWriter, r *http.Request) bool
}

func newFake() *fakeServices {
	return &fakeServices{users: map[string][]string{
		"ada": {admininterface.RoleAdmin}, "ann": {admininterface.RoleAnalyst}, "aud": {admininterface.RoleAuditor},
	}, accessTTL: 5 * time.Minute}
}

func (f *fakeServices) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seenAuth = append(f.seenAuth, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	if f.extra != nil && f.extra(w, r) {
		return
	}
	login := func(user string) {
		httpserver.WriteJSON(w, 200, admininterface.Login{
			AccessToken: "at-" + user, ExpiresAt: time.Now().Add(f.accessTTL),
			RefreshToken: fmt.Sprintf("rt-%s-%d", user, f.refreshes), RefreshExpiresAt: time.Now().Add(12 * time.Hour),
			User: admininterface.User{Username: user, Roles: f.users[user]},
		})
	}
	switch {
	case r.URL.Path == "/v1/login":
		var body struct{ Username, Password string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if _, ok := f.users[body.Username]; !ok || body.Password != "pw-"+body.Username {
			httpserver.WriteError(w, 401, "bad_credentials", "wrong username or password", nil)
			return
		}
		login(body.Username)
	case r.URL.Path == "/v1/refresh":
		var body struct {
			RefreshToken string `json:"refresh_token"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.refreshes++
		login(strings.Split(body.RefreshToken, "-")[1])
	case r.URL.Path == "/v1/oidc/login":
		http.SetCookie(w, &http.Cookie{Name: "tv_oidc_state", Value: "state-123", Path: "/v1/oidc/"})
		http.Redirect(w, r, "https://idp.example/authorize?state=state-123", http.StatusFound)
	case r.URL.Path == "/v1/oidc/callback":
		c, err := r.Cookie("tv_oidc_state")
		if err != nil || c.Value != r.URL.Query().Get("state") || r.URL.Query().Get("code") != "good" {
			httpserver.WriteError(w, 401, "invalid_state", "the sign-in state is missing, unknown or expired", nil)
			return
		}
		login("ann")
	case r.URL.Path == "/v1/logout":
		w.WriteHeader(204)
	case r.URL.Path == "/v1/me":
		user := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer at-")
		if _, ok := f.users[user]; !ok {
			httpserver.WriteError(w, 401, "unauthorized", "missing or invalid credentials", nil)
			return
		}
		httpserver.WriteJSON(w, 200, admininterface.User{Username: user, Roles: f.users[user]})
	case r.URL.Path == "/v1/tokens" && r.Method == http.MethodPost:
		var body struct {
			AppID string `json:"app_id"`
			Name  string `json:"name"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if strings.Contains(body.AppID, " ") {
			httpserver.WriteError(w, 422, "invalid", "app_id may contain only letters, digits, '.', '_' and '-'", nil)
			return
		}
		t := upstream.NewToken{Token: upstream.Token{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", len(f.tokens)+1),
			AppID: body.AppID, Name: body.Name, Active: true, CreatedAt: time.Now()}, Secret: "tvt_secret" + fmt.Sprint(len(f.tokens)+1)}
		f.tokens = append(f.tokens, t)
		httpserver.WriteJSON(w, 201, t)
	case r.URL.Path == "/v1/tokens":
		// As the tokens service: app_id selects one app, limit (1000 at
		// most) cuts the list.
		limit := 100
		fmt.Sscan(r.URL.Query().Get("limit"), &limit)
		out := []upstream.Token{}
		for _, t := range f.tokens {
			if a := r.URL.Query().Get("app_id"); (a == "" || t.AppID == a) && len(out) < limit {
				out = append(out, t.Token)
			}
		}
		httpserver.WriteJSON(w, 200, map[string]any{"tokens": out})
	case strings.HasPrefix(r.URL.Path, "/v1/tokens/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/tokens/")
		for i := range f.tokens {
			if f.tokens[i].ID == id {
				if r.Method == http.MethodDelete {
					f.tokens[i].Active = false
					w.WriteHeader(204)
					return
				}
				httpserver.WriteJSON(w, 200, f.tokens[i].Token)
				return
			}
		}
		httpserver.WriteError(w, 404, "not_found", "no such token", nil)
	case r.URL.Path == "/v1/audit" && r.Method == http.MethodPost:
		var b wire.AuditBatch
		_ = json.NewDecoder(r.Body).Decode(&b)
		f.posted = append(f.posted, b.Records...)
		httpserver.WriteJSON(w, 202, map[string]int{"accepted": len(b.Records)})
	case r.URL.Path == "/v1/audit":
		// Keyset paging over f.audit: the cursor is the index to start at.
		q := r.URL.Query()
		start := 0
		fmt.Sscan(q.Get("cursor"), &start)
		limit := 100
		fmt.Sscan(q.Get("limit"), &limit)
		var page []wire.AuditRecord
		i := start
		for ; i < len(f.audit) && len(page) < limit; i++ {
			if a := q.Get("action"); a != "" && f.audit[i].Action != a {
				continue
			}
			page = append(page, f.audit[i])
		}
		next := ""
		if i < len(f.audit) {
			next = fmt.Sprint(i)
		}
		httpserver.WriteJSON(w, 200, map[string]any{"records": page, "next_cursor": next})
	case strings.HasPrefix(r.URL.Path, "/v1/stats/"):
		httpserver.WriteJSON(w, 200, upstream.Stats{Dimension: strings.TrimPrefix(r.URL.Path, "/v1/stats/"), Total: 7,
			Series: []upstream.Series{{Key: "FR", Total: 7}}})
	case strings.HasPrefix(r.URL.Path, "/v1/charts/"):
		w.Header().Set("Content-Type", "image/svg+xml")
		io.WriteString(w, `<svg xmlns="http://www.w3.org/2000/svg"/>`)
	default:
		httpserver.WriteError(w, 404, "not_found", "no such resource", nil)
	}
}

type harness struct {
	fake *fakeServices
	ui   *httptest.Server
	srv  *Server
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	fake := newFake()
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	c := upstream.New(up.URL, nil, 5*time.Second)
	srv, err := New(Options{SessionKey: strings.Repeat("ab", 32), SecureCookies: false, CollectorURL: "http://collector.example:8080",
		InternalKey: "internal-key"}, Deps{
		Identity: upstream.Identity{Client: c}, Tokens: upstream.Tokens{Client: c},
		Audit: upstream.Audit{Client: c}, Renderer: upstream.Renderer{Client: c},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ui := httptest.NewServer(srv.Handler(httpserver.NewRegistry(), nil))
	t.Cleanup(ui.Close)
	h := &harness{fake: fake, ui: ui, srv: srv}
	investigationFake(h)
	return h
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (h *harness) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: h.ui.URL, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (b *browser) do(method, path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.base+path, body)
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field in page:\n%.500s", page)
	}
	return m[1]
}

func (b *browser) signIn(user string) string {
	b.t.Helper()
	_, page := b.do("GET", "/login", nil)
	resp, _ := b.do("POST", "/login", url.Values{"csrf": {csrfOf(b.t, page)}, "username": {user}, "password": {"pw-" + user}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign in as %s: status %d", user, resp.StatusCode)
	}
	_, page = b.do("GET", "/dashboards", nil)
	return csrfOf(b.t, page)
}

func TestServer_Headers(t *testing.T) {
	h := newHarness(t)
	b := h.browser(t)
	resp, _ := b.do("GET", "/login", nil)
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP = %q", csp)
	}
	cookies := resp.Header.Values("Set-Cookie")
	if len(cookies) != 1 || !strings.Contains(cookies[0], "HttpOnly") || !strings.Contains(cookies[0], "SameSite=Lax") {
		t.Errorf("Set-Cookie = %q, want HttpOnly, SameSite=Lax", cookies)
	}
	h.srv.opts.SecureCookies = true
	resp, _ = h.browser(t).do("GET", "/login", nil)
	if c := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(c, "__Host-tv_session=") || !strings.Contains(c, "; Secure") {
		t.Errorf("with SecureCookies, Set-Cookie = %q, want __Host- and Secure", c)
	}
}

func TestServer_SignIn(t *testing.T) {
	h := newHarness(t)
	t.Run("OK", func(t *testing.T) {
		b := h.browser(t)
		resp, _ := b.do("GET", "/tokens", nil)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=%2Ftokens") {
			t.Fatalf("GET /tokens signed out = %d %s, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
		}
		b.signIn("ada")
		resp, page := b.do("GET", "/tokens", nil)
		if resp.StatusCode != 200 || !strings.Contains(page, "Create a token") {
			t.Fatalf("GET /tokens as admin = %d", resp.StatusCode)
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		b := h.browser(t)
		_, page := b.do("GET", "/login", nil)
		resp, page := b.do("POST", "/login", url.Values{"csrf": {csrfOf(t, page)}, "username": {"ada"}, "password": {"nope"}})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Wrong username or password") {
			t.Fatalf("POST /login with a wrong password = %d", resp.StatusCode)
		}
		if n := testutil.ToFloat64(h.srv.signins.WithLabelValues("password", "refused")); n != 1 {
			t.Errorf("admininterface_signins_total{refused} = %v, want 1", n)
		}
	})
	t.Run("OffSiteNext", func(t *testing.T) {
		for _, next := range []string{"//evil.example/", "https://evil.example/", `/\evil.example`} {
			if got := safeNext(next); got != "/" {
				t.Errorf("safeNext(%q) = %q, want /", next, got)
			}
		}
	})
}

func TestServer_CSRF(t *testing.T) {
	h := newHarness(t)
	b := h.browser(t)
	csrf := b.signIn("ada")
	for name, form := range map[string]url.Values{
		"missing": {"app_id": {"a1"}, "name": {"x"}},
		"wrong":   {"app_id": {"a1"}, "name": {"x"}, "csrf": {csrf + "x"}},
	} {
		resp, _ := b.do("POST", "/tokens", form)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /tokens with %s CSRF token = %d, want 403", name, resp.StatusCode)
		}
	}
	// A cross-site POST carrying the right token (as a leaked page would
	// allow) is still refused on its Origin.
	req, _ := http.NewRequest("POST", b.base+"/tokens", strings.NewReader(url.Values{"app_id": {"a1"}, "name": {"x"}, "csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST = %d, want 403", resp.StatusCode)
	}
	// A JSON client gets the JSON error body.
	req, _ = http.NewRequest("POST", b.base+"/tokens", strings.NewReader("app_id=a1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var eb httpserver.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != 403 || eb.Error.Code != "csrf" {
		t.Errorf("JSON POST without CSRF = %d %+v, want 403 csrf", resp.StatusCode, eb)
	}
	if len(h.fake.tokens) != 0 {
		t.Errorf("refused POSTs created %d tokens, want 0", len(h.fake.tokens))
	}
}

func TestServer_Roles(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		user    string
		allowed []string
		refused []string
	}{
		{"ann", []string{"/dashboards"}, []string{"/tokens", "/audit", "/tokens/x/revoke", "/audit/export.csv"}},
		{"aud", []string{"/audit", "/audit/export.ndjson"}, []string{"/tokens", "/dashboards"}},
		{"ada", []string{"/tokens", "/audit", "/dashboards"}, nil},
	}
	for _, c := range cases {
		t.Run(c.user, func(t *testing.T) {
			b := h.browser(t)
			csrf := b.signIn(c.user)
			for _, p := range c.allowed {
				if resp, _ := b.do("GET", p, nil); resp.StatusCode != 200 {
					t.Errorf("GET %s as %s = %d, want 200", p, c.user, resp.StatusCode)
				}
			}
			for _, p := range c.refused {
				if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusForbidden {
					t.Errorf("GET %s as %s = %d, want 403", p, c.user, resp.StatusCode)
				}
			}
			if c.user == "ann" {
				resp, _ := b.do("POST", "/tokens", url.Values{"csrf": {csrf}, "app_id": {"a1"}, "name": {"x"}})
				if resp.StatusCode != http.StatusForbidden || len(h.fake.tokens) != 0 {
					t.Errorf("POST /tokens as analyst = %d with %d tokens, want 403 and none", resp.StatusCode, len(h.fake.tokens))
				}
				_, page := b.do("GET", "/dashboards", nil)
				if strings.Contains(page, `href="/tokens"`) {
					t.Errorf("the analyst's navigation links to /tokens")
				}
			}
		})
	}
}

func TestServer_Tokens(t *testing.T) {
	h := newHarness(t)
	b := h.browser(t)
	csrf := b.signIn("ada")
	resp, page := b.do("POST", "/tokens", url.Values{"csrf": {csrf}, "app_id": {"shop-app"}, "name": {"ci"}})
	if resp.StatusCode != http.StatusCreated || !strings.Contains(page, "tvt_secret1") ||
		!strings.Contains(page, "http://collector.example:8080/v1/events") || !strings.Contains(page, "Bearer tvt_secret1") {
		t.Fatalf("create = %d, page without the secret or curl:\n%s", resp.StatusCode, page)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the page with the secret has Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
	if got := h.fake.seenAuth[len(h.fake.seenAuth)-1]; got != "POST /v1/tokens Bearer at-ada" {
		t.Errorf("tokens service saw %q, want the person's access token", got)
	}
	resp, page = b.do("POST", "/tokens", url.Values{"csrf": {csrf}, "app_id": {"bad app"}, "name": {"ci"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "app_id may contain only") {
		t.Errorf("create with a bad app id = %d", resp.StatusCode)
	}
	_, page = b.do("GET", "/tokens", nil)
	if strings.Contains(page, "tvt_secret1") || !strings.Contains(page, "shop-app") {
		t.Errorf("the tokens page shows the secret, or not the app")
	}
	id := h.fake.tokens[0].ID
	resp, page = b.do("GET", "/tokens/"+id+"/revoke", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "Revoke token") {
		t.Fatalf("confirm page = %d", resp.StatusCode)
	}
	if resp, _ := b.do("POST", "/tokens/"+id+"/revoke", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther || !h.fake.tokens[0].Active {
		t.Errorf("revoke without confirm = %d, active %v; want a redirect and no change", resp.StatusCode, h.fake.tokens[0].Active)
	}
	resp, _ = b.do("POST", "/tokens/"+id+"/revoke", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther || h.fake.tokens[0].Active {
		t.Errorf("revoke = %d, active %v; want 303 and revoked", resp.StatusCode, h.fake.tokens[0].Active)
	}
	if resp, _ := b.do("GET", "/tokens/00000000-0000-4000-8000-999999999999/revoke", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("confirm for an unknown token = %d, want 404", resp.StatusCode)
	}
}

func auditRecords(n int) []wire.AuditRecord {
	var out []wire.AuditRecord
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		out = append(out, wire.AuditRecord{ID: fmt.Sprintf("00000000-0000-7000-8000-%012d", i), Time: t0.Add(time.Duration(i) * time.Second),
			Action: "collector.events", ActorApp: "shop-app", Outcome: []int{202, 202, 401}[i%3], EventCount: 1})
	}
	return out
}

func TestServer_Audit(t *testing.T) {
	h := newHarness(t)
	h.fake.audit = auditRecords(2500)
	b := h.browser(t)
	b.signIn("aud")
	base := "/audit?searched=1&from=2026-11-30T00:00&limit=40"

	t.Run("Paging", func(t *testing.T) {
		_, page := b.do("GET", base, nil)
		if n := strings.Count(page, "<td>collector.events</td>"); n != 40 {
			t.Fatalf("first page has %d rows, want 40", n)
		}
		m := regexp.MustCompile(`href="/audit\?([^"]+)" rel="next"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatal("no next-page link")
		}
		_, page = b.do("GET", "/audit?"+strings.ReplaceAll(m[1], "&amp;", "&"), nil)
		if !strings.Contains(page, "00000000-0000-7000-8000-000000000040") && !strings.Contains(page, "2026-11-30 12:00:40") {
			t.Errorf("second page does not start after the first")
		}
	})
	t.Run("Outcome", func(t *testing.T) {
		_, page := b.do("GET", base+"&outcome=4xx", nil)
		if n := strings.Count(page, "<td>401</td>"); n < 40 || strings.Contains(page, "<td>202</td>") {
			t.Errorf("outcome 4xx page has %d rows of 401 (want ≥ 40) or a 202", n)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, q := range []string{"&outcome=abc", "&limit=0", "&from=2026-11-30T00:00&to=2026-11-29T00:00", "&from=yesterday"} {
			if resp, _ := b.do("GET", "/audit?searched=1"+q, nil); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("GET %s = %d, want 400", q, resp.StatusCode)
			}
		}
	})
	t.Run("ExportCSV", func(t *testing.T) {
		resp, body := b.do("GET", "/audit/export.csv?searched=1&outcome=202", nil)
		lines := strings.Split(strings.TrimSpace(body), "\n")
		// 2500 records over three pages of 1000; two in three are 202.
		if resp.StatusCode != 200 || len(lines) != 1+1667 || !strings.HasPrefix(lines[0], "id,time,action") {
			t.Fatalf("CSV export = %d with %d lines, want 200 with 1668", resp.StatusCode, len(lines))
		}
		if !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("Content-Disposition = %q", resp.Header.Get("Content-Disposition"))
		}
	})
	t.Run("ExportNDJSON", func(t *testing.T) {
		resp, body := b.do("GET", "/audit/export.ndjson?searched=1", nil)
		lines := strings.Split(strings.TrimSpace(body), "\n")
		var rec wire.AuditRecord
		if resp.StatusCode != 200 || len(lines) != 2500 || json.Unmarshal([]byte(lines[2499]), &rec) != nil || rec.ID != h.fake.audit[2499].ID {
			t.Fatalf("NDJSON export = %d with %d lines, last %q", resp.StatusCode, len(lines), lines[len(lines)-1])
		}
	})
}

func TestServer_Refresh(t *testing.T) {
	h := newHarness(t)
	h.fake.accessTTL = 30 * time.Second // inside refreshMargin: every page refreshes
	b := h.browser(t)
	b.signIn("ann")
	before := h.fake.refreshes
	b.do("GET", "/dashboards", nil)
	if h.fake.refreshes != before+1 {
		t.Fatalf("a page with an expiring token made %d refreshes, want 1", h.fake.refreshes-before)
	}
	// The chart images of a page never refresh: identity would take a
	// second use of the same refresh token as theft.
	before = h.fake.refreshes
	if resp, _ := b.do("GET", "/dashboards/chart/country.svg?range=24h", nil); resp.StatusCode != 200 {
		t.Fatalf("chart = %d", resp.StatusCode)
	}
	if h.fake.refreshes != before {
		t.Errorf("a chart request refreshed the session")
	}
}

func TestServer_Dashboards(t *testing.T) {
	h := newHarness(t)
	b := h.browser(t)
	b.signIn("ann")
	resp, page := b.do("GET", "/dashboards?app_id=shop-app&range=7d", nil)
	if resp.StatusCode != 200 || strings.Count(page, `data-dimension=`) != 4 || !strings.Contains(page, "/dashboards/chart/country.svg?app_id=shop-app&amp;range=7d") {
		t.Fatalf("dashboards = %d:\n%s", resp.StatusCode, page)
	}
	if resp, _ := b.do("GET", "/dashboards?range=1y", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown range = %d, want 400", resp.StatusCode)
	}
	resp, body := b.do("GET", "/dashboards/chart/os.svg?range=24h", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(body, "<svg") {
		t.Errorf("chart = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := b.do("GET", "/dashboards/chart/secrets.svg", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown chart = %d, want 404", resp.StatusCode)
	}
}

func TestSampler_Rates(t *testing.T) {
	s := NewSampler(nil, 10*time.Second)
	t0 := time.Now().Add(-2 * time.Hour)
	s.add(counters{t: t0, events: 100, requests: 10})
	s.add(counters{t: t0.Add(10 * time.Second), events: 200, requests: 20})
	s.add(counters{t: t0.Add(20 * time.Second), events: 50, requests: 5}) // the collector restarted
	p := s.Points()
	if len(p) != 2 || p[0].EventsPerSec != 10 || p[0].RequestsPerSec != 1 || p[1].EventsPerSec != 5 {
		t.Fatalf("Points = %+v, want 10/s then 5/s after the restart", p)
	}
	s.add(counters{t: t0.Add(2 * time.Hour), events: 60, requests: 6})
	if p := s.Points(); len(p) != 1 {
		t.Errorf("after an hour, %d points kept, want only the newest", len(p))
	}
}

type fakeRetention struct{}

func (fakeRetention) Partitions(context.Context) ([]admininterface.Partition, error) {
	return []admininterface.Partition{{Database: "events", Table: "events.events", Name: "events_y2026m11", Bound: "FOR VALUES FROM (a) TO (b)", Rows: 42, Bytes: 3 << 20}}, nil
}

func (fakeRetention) Archives(context.Context) ([]admininterface.Archive, error) {
	return []admininterface.Archive{
		{Database: "events", Table: "events.events", Partition: "events_y2026m11", Rows: 42, SHA256: strings.Repeat("ab", 32)},
		{Database: "events", Table: "events.events", Partition: "events_y2026m01", Rows: 7, SHA256: strings.Repeat("cd", 32)},
	}, nil
}

func TestServer_Retention(t *testing.T) {
	h := newHarness(t)
	h.srv.deps.Retention = []RetentionReader{fakeRetention{}}
	script := filepath.Join(t.TempDir(), "cleanup")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '{\"level\":\"INFO\",\"msg\":\"would drop partition\",\"partition\":\"events_y2026m01\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.srv.opts.CleanupCommand = []string{script}
	b := h.browser(t)
	csrf := b.signIn("ada")
	resp, page := b.do("GET", "/retention", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "events_y2026m11") || !strings.Contains(page, "3.0 MiB") ||
		!strings.Contains(page, "present (≈42 rows)") || !strings.Contains(page, "dropped") {
		t.Fatalf("retention page = %d:\n%s", resp.StatusCode, page)
	}
	resp, page = b.do("POST", "/retention/dry-run", url.Values{"csrf": {csrf}})
	if resp.StatusCode != 200 || !strings.Contains(page, "would drop partition") || !strings.Contains(page, "partition=events_y2026m01") {
		t.Fatalf("dry run = %d:\n%s", resp.StatusCode, page)
	}
	b2 := h.browser(t)
	b2.signIn("aud")
	if resp, _ := b2.do("GET", "/retention", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("retention as an auditor = %d, want 403", resp.StatusCode)
	}
}

func TestServer_OIDC(t *testing.T) {
	h := newHarness(t)
	h.srv.opts.OIDC = true
	t.Run("OK", func(t *testing.T) {
		b := h.browser(t)
		if _, page := b.do("GET", "/login", nil); !strings.Contains(page, `href="/login/oidc"`) {
			t.Fatal("no company sign-in link")
		}
		resp, _ := b.do("GET", "/login/oidc", nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "https://idp.example/authorize?state=state-123" {
			t.Fatalf("GET /login/oidc = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		resp, _ = b.do("GET", "/login/oidc/callback?state=state-123&code=good", nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("callback = %d", resp.StatusCode)
		}
		if resp, _ := b.do("GET", "/dashboards", nil); resp.StatusCode != 200 {
			t.Fatalf("after the OIDC sign-in, /dashboards = %d", resp.StatusCode)
		}
	})
	t.Run("ErrState", func(t *testing.T) {
		// A callback this browser did not start (login CSRF), or with
		// another state, signs nobody in.
		b := h.browser(t)
		b.do("GET", "/login", nil)
		if resp, _ := b.do("GET", "/login/oidc/callback?state=state-123&code=good", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("callback not started here = %d, want 401", resp.StatusCode)
		}
		b.do("GET", "/login/oidc", nil)
		if resp, _ := b.do("GET", "/login/oidc/callback?state=other&code=good", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("callback with another state = %d, want 401", resp.StatusCode)
		}
		if resp, _ := b.do("GET", "/dashboards", nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("after refused callbacks, /dashboards = %d, want a redirect to sign in", resp.StatusCode)
		}
	})
}
