package security

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRenderer_SignIn against the running renderer: people sign in with
// their username and password (identity checks them), the admin key typed
// into the form opens nothing, and no crafted next takes the browser off
// the site after sign-in (browsers drop tabs and newlines and read a
// backslash as a slash).
func TestRenderer_SignIn(t *testing.T) {
	e := mustIdentity(t)
	if e.RendererURL == "" {
		t.Fatal("THREATVIEW_RENDERER_URL is not set")
	}
	admin := e.login(t, e.adminUser, e.adminPassword).AccessToken
	analyst, analystPW := e.person(t, admin, "redirect-analyst", "analyst")
	ui := &uiClient{t: t, base: strings.TrimRight(e.RendererURL, "/"), cookies: map[string]string{}}
	_, page := ui.do(http.MethodGet, "/signin", nil)
	m := csrfField.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the renderer's sign-in page:\n%.500s", page)
	}
	csrf := string(m[1])
	signIn := func(user, pw, next string) *http.Response {
		resp, _ := ui.do(http.MethodPost, "/signin", url.Values{"csrf": {csrf}, "username": {user}, "password": {pw}, "key": {pw}, "next": {next}})
		return resp
	}
	t.Run("AdminKeyOpensNothing", func(t *testing.T) {
		if resp := signIn("", e.AdminKey, "/"); resp.StatusCode == http.StatusSeeOther {
			t.Fatalf("the admin key in the sign-in form signed in (%d)", resp.StatusCode)
		}
		if resp := signIn("admin", e.AdminKey, "/"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the admin key as a password = %d, want 401", resp.StatusCode)
		}
	})
	for _, next := range []string{"/\t/evil.example", "/\\evil.example", "//evil.example", "/%09/evil.example", "/%5Cevil.example",
		"/%2F%2Fevil.example", "%2F%2Fevil.example", "https://evil.example/", "http:evil.example", "/\r\n/evil.example",
		"\t//evil.example", "/\\\t\\evil.example", "javascript:alert(1)", "///evil.example"} {
		resp := signIn(analyst, analystPW, next)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
			t.Errorf("sign-in with next=%q: %d to %q, want 303 to /", next, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp := signIn(analyst, analystPW, "/dashboards/os?range=7d"); resp.Header.Get("Location") != "/dashboards/os?range=7d" {
		t.Errorf("a local next led to %q, want it kept", resp.Header.Get("Location"))
	}
	if _, ok := ui.cookies["__Host-tv_session"]; !ok {
		t.Fatalf("no __Host-tv_session cookie after sign-in: %v", ui.cookies)
	}
	if resp, body := ui.do(http.MethodGet, "/dashboards/os", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a dashboard with the session = %d %.300s", resp.StatusCode, body)
	}
}
