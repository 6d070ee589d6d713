package webui

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/admininterface/upstream"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
)

// identityStub answers identity's sign-in calls as a test wants, and serves
// the rest from the fake services; it records what the UI sent.
type identityStub struct {
	fake *fakeServices
	mu   sync.Mutex
	// login, refresh and me answer POST /v1/login, POST /v1/refresh and
	// GET /v1/me when set.
	login, refresh, me http.HandlerFunc
	seen               []http.Header
}

func (s *identityStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen = append(s.seen, r.Header.Clone())
	var h http.HandlerFunc
	switch r.URL.Path {
	case "/v1/login":
		h = s.login
	case "/v1/refresh":
		h = s.refresh
	case "/v1/me":
		h = s.me
	}
	s.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	s.fake.ServeHTTP(w, r)
}

func (s *identityStub) lastHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

// newStubbedHarness is newHarness with identity answered by stub and the
// UI's log kept.
func newStubbedHarness(t *testing.T, opts Options) (*harness, *identityStub, *testenv.SyncBuffer) {
	t.Helper()
	h := newHarness(t)
	stub := &identityStub{fake: h.fake}
	id := httptest.NewServer(stub)
	t.Cleanup(id.Close)
	logBuf := &testenv.SyncBuffer{}
	h.srv.log = slog.New(slog.NewJSONHandler(logBuf, nil))
	h.srv.deps.Identity = upstream.Identity{Client: upstream.New(id.URL, nil, 2*time.Second), ForwarderKey: "forwarder-key"}
	h.srv.opts.TrustedProxies = opts.TrustedProxies
	return h, stub, logBuf
}

// TestSignIn_OpenRedirect: whatever next a link carries, sign-in lands on
// this site (a tab, backslash, // or an encoded form used to get through:
// browsers read "/\t/evil.example" as "//evil.example").
func TestSignIn_OpenRedirect(t *testing.T) {
	h := newHarness(t)
	for _, next := range []string{
		"/\t/evil.example", "/\n/evil.example", "//evil.example", `/\evil.example`, `\\evil.example`,
		"/%2F%2Fevil.example", "/%5Cevil.example", "https://evil.example/", "http:evil.example", "javascript:alert(1)",
		" //evil.example", "/%09/evil.example",
	} {
		t.Run(url.QueryEscape(next), func(t *testing.T) {
			b := h.browser(t)
			_, page := b.do("GET", "/login?next="+url.QueryEscape(next), nil)
			if strings.Contains(page, "evil.example") {
				t.Errorf("the sign-in page carries next=%q on", next)
			}
			resp, _ := b.do("POST", "/login", url.Values{"csrf": {csrfOf(t, page)}, "username": {"ada"}, "password": {"pw-ada"}, "next": {next}})
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/" {
				t.Errorf("POST /login next=%q = %d Location %q, want 303 to /", next, resp.StatusCode, loc)
			}
			resp, _ = b.do("GET", "/login?next="+url.QueryEscape(next), nil)
			if loc := resp.Header.Get("Location"); loc != "/" {
				t.Errorf("GET /login signed in, next=%q: Location %q, want /", next, loc)
			}
		})
	}
	b := h.browser(t)
	_, page := b.do("GET", "/login", nil)
	resp, _ := b.do("POST", "/login", url.Values{"csrf": {csrfOf(t, page)}, "username": {"ada"}, "password": {"pw-ada"}, "next": {"/audit?from=x#top"}})
	if loc := resp.Header.Get("Location"); loc != "/audit?from=x#top" {
		t.Errorf("a local next: Location %q, want /audit?from=x#top", loc)
	}
}

// TestSignIn_Throttled: identity's 429 is shown as what it is, with the
// wait, not as a wrong password; the browser's address goes to identity
// with the forwarder key; the username typed is not logged.
func TestSignIn_Throttled(t *testing.T) {
	h, stub, logBuf := newStubbedHarness(t, Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	stub.login = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "600")
		httpserver.WriteError(w, http.StatusTooManyRequests, "throttled", "too many failed sign-ins; try again later", nil)
	}
	b := h.browser(t)
	_, page := b.do("GET", "/login", nil)
	typed := "Secret-Typed-Into-Username-1"
	req, _ := http.NewRequest("POST", b.base+"/login", strings.NewReader(url.Values{"csrf": {csrfOf(t, page)}, "username": {typed}, "password": {"x"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "600" ||
		!strings.Contains(body, "Too many failed sign-ins") || !strings.Contains(body, "10 minutes") || strings.Contains(body, "Wrong username") {
		t.Errorf("throttled sign-in = %d Retry-After %q, want 429, 600 and the wait:\n%.2000s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	got := stub.lastHeader()
	if got.Get("X-Forwarded-For") != "198.51.100.7" || got.Get("X-Forwarder-Key") != "forwarder-key" {
		t.Errorf("identity saw X-Forwarded-For %q with key %q, want the browser's 198.51.100.7 and the key",
			got.Get("X-Forwarded-For"), got.Get("X-Forwarder-Key"))
	}
	stub.login = func(w http.ResponseWriter, r *http.Request) {
		httpserver.WriteError(w, http.StatusUnauthorized, "invalid_credentials", "wrong username or password", nil)
	}
	// Without a trusted proxy in front, a browser's own X-Forwarded-For is
	// not believed: identity gets the peer's address.
	h.srv.opts.TrustedProxies = nil
	resp, _ = b.do("POST", "/login", url.Values{"csrf": {csrfOf(t, page)}, "username": {typed}, "password": {"x"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong password = %d, want 401", resp.StatusCode)
	}
	if got := stub.lastHeader().Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("identity saw X-Forwarded-For %q, want the peer 127.0.0.1", got)
	}
	if strings.Contains(logBuf.String(), typed) {
		t.Errorf("the log holds what was typed as the username:\n%s", logBuf.String())
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

// TestSession_FailClosed: with identity unable to renew a session, the UI
// carries on only while the access token is good, then refuses (keeping
// the session for when identity is back); actions taken with the UI's own
// privileges (dead letters, retention) ask identity first and do nothing
// when it refuses the person or cannot answer.
func TestSession_FailClosed(t *testing.T) {
	h, stub, _ := newStubbedHarness(t, Options{})
	b := h.browser(t)
	csrf := b.signIn("ada")
	start := time.Now()
	stub.refresh = func(w http.ResponseWriter, r *http.Request) {
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "down", nil)
	}
	h.srv.now = func() time.Time { return start.Add(4 * time.Minute) } // inside the renewal margin
	if resp, _ := b.do("GET", "/tokens", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("identity down, access token still good: GET /tokens = %d, want 200", resp.StatusCode)
	}
	h.srv.now = func() time.Time { return start.Add(6 * time.Minute) } // past the access token's expiry
	for _, p := range []string{"/tokens", "/audit", "/dashboards/chart/country.svg"} {
		if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("identity down, access token expired: GET %s = %d, want 503 or 401", p, resp.StatusCode)
		}
	}
	if resp, _ := b.do("POST", "/dlq/events/delete", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "id": {"m1"}}); resp.StatusCode/100 != 4 && resp.StatusCode != 503 {
		t.Errorf("identity down, access token expired: POST /dlq/events/delete = %d, want a refusal", resp.StatusCode)
	}
	stub.refresh = nil // identity is back: the same session renews
	if resp, _ := b.do("GET", "/tokens", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("identity back: GET /tokens = %d, want 200", resp.StatusCode)
	}

	// UI-privileged actions ask identity about the person first.
	h.srv.now = time.Now
	b = h.browser(t)
	csrf = b.signIn("ada")
	for _, c := range []struct {
		name   string
		me     http.HandlerFunc
		status int
	}{
		{"IdentityDown", func(w http.ResponseWriter, r *http.Request) {
			httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "down", nil)
		}, http.StatusServiceUnavailable},
		{"Demoted", func(w http.ResponseWriter, r *http.Request) {
			httpserver.WriteJSON(w, 200, map[string]any{"username": "ada", "roles": []string{"analyst"}})
		}, http.StatusForbidden},
		{"Disabled", func(w http.ResponseWriter, r *http.Request) {
			httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid credentials", nil)
		}, http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			stub.me = c.me
			for _, p := range []string{"/dlq/events/delete", "/dlq/events/replay", "/retention/dry-run"} {
				resp, _ := b.do("POST", p, url.Values{"csrf": {csrf}, "confirm": {"yes"}, "id": {"m1"}, "all": {"yes"}})
				if resp.StatusCode != c.status {
					t.Errorf("POST %s = %d, want %d", p, resp.StatusCode, c.status)
				}
				if c.status == http.StatusUnauthorized {
					b = h.browser(t)
					csrf = b.signIn("ada")
				}
			}
		})
	}
}
