package security

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/identity"
	"threatview/identity/httpapi"
	"threatview/identity/mariadb"
	"threatview/migrations"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
)

// uiBrowser is a browser-like client of an admin interface: it keeps the
// session cookie (Secure cookies too: browsers keep them on
// http://127.0.0.1), sends the headers a browser sends, does not follow
// redirects, and may connect from a loopback address of its own (another
// person's machine).
type uiBrowser struct {
	t          *testing.T
	base       string
	signInPath string // the sign-in form's path: /login (admin interface) or /signin (renderer)
	hc         *http.Client
	cookies    map[string]string
	csrf       string
}

func newUIBrowser(t *testing.T, base, from string) *uiBrowser {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &uiBrowser{t: t, base: base, signInPath: "/login", cookies: map[string]string{}, hc: &http.Client{
		Timeout:       30 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var uiCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *uiBrowser) do(method, path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.base+path, body)
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
	}
	for name, value := range b.cookies {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	if m := uiCSRF.FindStringSubmatch(string(out)); m != nil {
		b.csrf = m[1]
	}
	return resp, string(out)
}

// signIn posts the sign-in form (after loading it) and returns the answer.
func (b *uiBrowser) signIn(user, password, next string) *http.Response {
	b.t.Helper()
	if b.csrf == "" {
		b.do("GET", b.signInPath, nil)
	}
	resp, _ := b.do("POST", b.signInPath, url.Values{"csrf": {b.csrf}, "username": {user}, "password": {password}, "next": {next}})
	return resp
}

// TestAdminUI_OpenRedirect: whatever a link's next says, signing in to the
// running admin interface lands on its own start page.
func TestAdminUI_OpenRedirect(t *testing.T) {
	e := mustIdentity(t)
	ui := testenv.MustEnv(t, "THREATVIEW_ADMIN_UI_URL")
	for _, next := range []string{
		"/\t/evil.example", "/\r\n/evil.example", "//evil.example", "///evil.example", `/\evil.example`, `\\evil.example`,
		"/%2F%2Fevil.example", "/%2f%5cevil.example", "/%09/evil.example", "https://evil.example/", "HTTPS://evil.example",
		"http:evil.example", "//evil.example@127.0.0.1/", "javascript:alert(1)", " //evil.example",
	} {
		b := newUIBrowser(t, ui, "")
		b.do("GET", "/login?next="+url.QueryEscape(next), nil)
		resp := b.signIn(e.adminUser, e.adminPassword, next)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/" {
			t.Errorf("sign-in with next=%q = %d, Location %q; want 303 to /", next, resp.StatusCode, loc)
		}
	}
}

// TestAdminUI_ThrottleIsPerBrowser: one machine's wrong passwords through
// the admin interface lock out that machine, not every operator (the UI
// names each browser to identity).
func TestAdminUI_ThrottleIsPerBrowser(t *testing.T) {
	e := mustIdentity(t)
	ui := testenv.MustEnv(t, "THREATVIEW_ADMIN_UI_URL")
	// Addresses of its own, so this test's spraying locks out no other test.
	suffix := make([]byte, 2)
	_, _ = rand.Read(suffix)
	attackerAddr := fmt.Sprintf("127.%d.%d.7", 100+suffix[0]%100, suffix[1])
	attacker := newUIBrowser(t, ui, attackerAddr)
	var throttled *http.Response
	var page string
	for i := range 150 { // the local stack allows 100 failures per address
		attacker.do("GET", "/login", nil)
		resp, body := attacker.do("POST", "/login", url.Values{"csrf": {attacker.csrf},
			"username": {fmt.Sprintf("nobody-%x-%d", suffix, i)}, "password": {"not the password"}})
		if resp.StatusCode == http.StatusTooManyRequests {
			throttled, page = resp, body
			break
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d = %d, want 401 (or 429 once throttled)", i, resp.StatusCode)
		}
	}
	if throttled == nil {
		t.Fatal("150 wrong passwords from one address were never throttled")
	}
	if throttled.Header.Get("Retry-After") == "" || !strings.Contains(page, "Too many failed sign-ins") || !strings.Contains(page, "Try again in") {
		t.Errorf("the throttled answer has Retry-After %q and does not say why and when:\n%.1500s", throttled.Header.Get("Retry-After"), page)
	}
	operator := newUIBrowser(t, ui, fmt.Sprintf("127.%d.%d.8", 100+suffix[0]%100, suffix[1]))
	if resp := operator.signIn(e.adminUser, e.adminPassword, "/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the admin from another machine signs in = %d, want 303: one attacker locked everyone out", resp.StatusCode)
	}
}

// identityForUI is an identity service in this process, on a fresh
// database, with short access tokens, that the test can take down: down
// makes every request stall until the caller gives up (a hung identity,
// not a refused connection).
type identityForUI struct {
	url  string
	svc  *identity.Service
	down atomic.Bool
}

const uiTestAccessTTL = 20 * time.Second

func startIdentityForUI(t *testing.T) *identityForUI {
	t.Helper()
	db, err := mariadb.Open(testenv.MustMariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(context.Background(), db, migrations.Identity); err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	keys, _ := identity.ParseKeyring(hex.EncodeToString(seed))
	hasher, _ := identity.NewHasher(identity.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}, 2)
	log := slog.New(slog.DiscardHandler)
	id := &identityForUI{svc: identity.NewService(mariadb.New(db), hasher, keys, nil,
		identity.Options{AccessTTL: uiTestAccessTTL, RefreshGrace: 10 * time.Second}, log)}
	api := httpapi.New(id.svc, httpapi.Options{}, httpserver.NewRegistry(), nil, log)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id.down.Load() {
			// Read the body first: only then does the server notice the
			// caller hanging up and end r's context.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	id.url = srv.URL
	return id
}

func (id *identityForUI) person(t *testing.T, name, role string) {
	t.Helper()
	if _, err := id.svc.CreateUser(context.Background(), identity.NewUser{Username: name, Password: name + " password 1", Roles: []string{role}}, identity.Meta{Actor: "test"}); err != nil {
		t.Fatal(err)
	}
}

// disable disables the person name at identity, as admin by does.
func (id *identityForUI) disable(t *testing.T, name, by string) {
	t.Helper()
	disabled := true
	if _, err := id.svc.UpdateUser(context.Background(), name, identity.UserChange{Disabled: &disabled}, identity.Meta{Actor: by}); err != nil {
		t.Fatal(err)
	}
}

// startAdminUI runs the admin interface's binary in front of identityURL
// and returns its URL.
func startAdminUI(t *testing.T, identityURL string) string {
	t.Helper()
	return testenv.StartAdminInterface(t, "", identityURL,
		"ADMINUI_UPSTREAM_TIMEOUT=2s", "ADMINUI_CLEANUP_COMMAND=/bin/true").URL
}

// TestAdminUI_FailClosedIdentityDown: with identity hung, the admin
// interface serves a signed-in person only while their access token is good,
// then refuses pages and the actions it takes with its own privileges (the
// retention dry run here, dead-letter replay and delete alike); once
// identity answers again, the same session renews.
func TestAdminUI_FailClosedIdentityDown(t *testing.T) {
	id := startIdentityForUI(t)
	ui := startAdminUI(t, id.url)
	id.person(t, "fay", "admin")
	b := newUIBrowser(t, ui, "")
	if resp := b.signIn("fay", "fay password 1", "/retention"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in = %d", resp.StatusCode)
	}
	signedInAt := time.Now()
	id.down.Store(true)
	if resp, _ := b.do("GET", "/retention", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("identity down, access token good: GET /retention = %d, want 200", resp.StatusCode)
	}
	if resp, _ := b.do("POST", "/retention/dry-run", url.Values{"csrf": {b.csrf}}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("identity down: POST /retention/dry-run = %d, want 503 (not run with the UI's privileges unchecked)", resp.StatusCode)
	}
	time.Sleep(time.Until(signedInAt.Add(uiTestAccessTTL + time.Second)))
	if resp, _ := b.do("GET", "/retention", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("identity down, access token expired: GET /retention = %d, want 503", resp.StatusCode)
	}
	id.down.Store(false)
	if resp, _ := b.do("GET", "/retention", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("identity back: GET /retention = %d, want 200 (the session renews)", resp.StatusCode)
	}
}

// TestAdminUI_DisabledPersonLockedOut: an admin disabled in identity loses
// the UI's own-privilege actions at once and every page within the access
// token's lifetime (5 minutes in production; 20 s here).
func TestAdminUI_DisabledPersonLockedOut(t *testing.T) {
	id := startIdentityForUI(t)
	ui := startAdminUI(t, id.url)
	id.person(t, "dan", "admin")
	id.person(t, "boss", "admin")
	b := newUIBrowser(t, ui, "")
	if resp := b.signIn("dan", "dan password 1", "/retention"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in = %d", resp.StatusCode)
	}
	if resp, _ := b.do("GET", "/retention", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /retention = %d", resp.StatusCode)
	}
	csrf := b.csrf
	id.disable(t, "dan", "boss")
	disabledAt := time.Now()
	if resp, _ := b.do("POST", "/retention/dry-run", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("disabled: POST /retention/dry-run = %d, want 401 at once", resp.StatusCode)
	}
	for {
		resp, _ := b.do("GET", "/retention", nil)
		if resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/login") {
			break
		}
		if time.Since(disabledAt) > uiTestAccessTTL+5*time.Second {
			t.Fatalf("disabled for %s: GET /retention = %d, want a redirect to sign in", time.Since(disabledAt).Round(time.Second), resp.StatusCode)
		}
		time.Sleep(time.Second)
	}
	if resp := newUIBrowser(t, ui, "").signIn("dan", "dan password 1", "/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a disabled person signs in = %d, want 401", resp.StatusCode)
	}
}

// TestIdentity_UserAdminPeopleOnly signs a User Administrator in and checks
// every service that enforces roles: people management at identity works
// (but not on an Account Owner, nor making one); tokens, the audit trail,
// statistics, events, alerts and privacy all refuse them.
func TestIdentity_UserAdminPeopleOnly(t *testing.T) {
	e := mustIdentity(t)
	admin := e.login(t, e.adminUser, e.adminPassword).AccessToken
	name, pw := e.person(t, admin, "e2e-uadmin", "user_admin")
	uadmin := e.login(t, name, pw).AccessToken
	from := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	to := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	refused := []struct{ name, method, url, body string }{
		{"list tokens", http.MethodGet, e.TokensURL + "/v1/tokens?limit=1", ""},
		{"create token", http.MethodPost, e.TokensURL + "/v1/tokens", `{"app_id":"e2e-uadmin"}`},
		{"read audit", http.MethodGet, e.AuditURL + "/v1/audit?limit=1", ""},
		{"read stats", http.MethodGet, e.RendererURL + "/v1/stats/country?granularity=hour&from=" + from + "&to=" + to, ""},
		{"list events", http.MethodGet, e.RendererURL + "/v1/events?limit=1", ""},
		{"overview", http.MethodGet, e.RendererURL + "/v1/overview", ""},
		{"delete the owner", http.MethodDelete, e.IdentityURL + "/v1/users/" + e.adminUser, ""},
		{"reset the owner's password", http.MethodPut, e.IdentityURL + "/v1/users/" + e.adminUser + "/password", `{"password":"taken over password"}`},
		{"make an owner", http.MethodPost, e.IdentityURL + "/v1/users", `{"username":"` + e2etest.Name("e2e-owner") + `","password":"an owner password","roles":["admin"]}`},
	}
	if u := os.Getenv("THREATVIEW_ALERTS_URL"); u != "" {
		refused = append(refused, struct{ name, method, url, body string }{"list alert rules", http.MethodGet, u + "/v1/alert-rules", ""})
	}
	if u := os.Getenv("THREATVIEW_PRIVACY_URL"); u != "" {
		refused = append(refused, struct{ name, method, url, body string }{"request an erasure", http.MethodPost, u + "/v1/erasures", `{"app_id":"x","device_id":"y"}`})
	}
	for _, c := range refused {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		e2etest.CheckError(t, "user_admin "+c.name, e2etest.Do(t, c.method, c.url, uadmin, body, nil), http.StatusForbidden)
	}
	if r := e2etest.Do(t, http.MethodGet, e.IdentityURL+"/v1/users", uadmin, nil, nil); r.Status != http.StatusOK {
		t.Errorf("user_admin lists people: %d %s", r.Status, r.Body)
	}
	analyst := e2etest.Name("e2e-by-uadmin")
	t.Cleanup(func() {
		e2etest.TryDo(http.MethodDelete, e.IdentityURL+"/v1/users/"+analyst, e.AdminKey, nil, nil) //nolint:errcheck // best effort
	})
	body := []byte(`{"username":"` + analyst + `","password":"an analyst password","roles":["analyst"]}`)
	if r := e2etest.Do(t, http.MethodPost, e.IdentityURL+"/v1/users", uadmin, body, nil); r.Status != http.StatusCreated {
		t.Errorf("user_admin creates an analyst: %d %s", r.Status, r.Body)
	}
	for _, lock := range []string{"true", "false"} {
		if r := e2etest.Do(t, http.MethodPatch, e.IdentityURL+"/v1/users/"+analyst, uadmin, []byte(`{"disabled":`+lock+`}`), nil); r.Status != http.StatusOK {
			t.Errorf("user_admin sets disabled=%s: %d %s", lock, r.Status, r.Body)
		}
	}
}
