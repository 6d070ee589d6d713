package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"threatview/visualrenderer/identity"
	"threatview/visualrenderer/internal/rtest"
)

// TestAuth_SessionEnds: the renderer's sign-in cookie could not be revoked
// (an HMAC over an expiry, up to 168 h). A person's session now ends at
// identity: after sign-out or when disabled, the next page past the access
// token's life (5 minutes at most) goes to the sign-in form; with identity
// unreachable, pages answer 503 once the access token has expired rather
// than let it go on.
func TestAuth_SessionEnds(t *testing.T) {
	idURL, idKey := rtest.MustIdentity(t)
	a := NewIdentityAuth(idURL, "", "", true, nil)
	page := a.Page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	signIn := func(t *testing.T, user, pw string) (*http.Cookie, identity.Session) {
		t.Helper()
		s, err := a.idp.Login(t.Context(), user, pw, netip.Addr{})
		if err != nil {
			t.Fatalf("Login: %v", err)
		}
		rec := httptest.NewRecorder()
		a.setSession(rec, fromIdentity(s))
		return rec.Result().Cookies()[0], s
	}
	get := func(ck *http.Cookie) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/dashboards/os", nil)
		r.AddCookie(ck)
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, r)
		return rec
	}
	// later is when the access token is due for renewal.
	later := func() time.Time { return time.Now().Add(5 * time.Minute) }
	t.Cleanup(func() { a.now = time.Now })
	user, pw := rtest.MustPerson(t, idURL, idKey, "analyst")

	t.Run("Renewed", func(t *testing.T) {
		ck, _ := signIn(t, user, pw)
		a.now = time.Now
		if rec := get(ck); rec.Code != http.StatusNoContent {
			t.Fatalf("page with a fresh session = %d, want 204", rec.Code)
		}
		a.now = later
		rec := get(ck)
		renewed := rec.Result().Cookies()
		if rec.Code != http.StatusNoContent || len(renewed) != 1 || renewed[0].Name != "__Host-tv_session" || renewed[0].Value == ck.Value {
			t.Fatalf("page with the token due = %d, cookies %v; want 204 and a renewed session", rec.Code, renewed)
		}
	})
	t.Run("SignedOut", func(t *testing.T) {
		a.now = time.Now
		ck, s := signIn(t, user, pw)
		if err := a.idp.Logout(t.Context(), s.RefreshToken); err != nil {
			t.Fatal(err)
		}
		a.now = later
		rec := get(ck)
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/signin") ||
			!strings.Contains(rec.Header().Get("Set-Cookie"), "Max-Age=0") {
			t.Fatalf("page after sign-out = %d to %q (%q), want 303 to /signin, cookie cleared", rec.Code, rec.Header().Get("Location"), rec.Header().Get("Set-Cookie"))
		}
	})
	t.Run("Disabled", func(t *testing.T) {
		a.now = time.Now
		other, otherPW := rtest.MustPerson(t, idURL, idKey, "analyst")
		ck, _ := signIn(t, other, otherPW)
		rtest.DisablePerson(t, idURL, idKey, other)
		a.now = later
		if rec := get(ck); rec.Code != http.StatusSeeOther {
			t.Fatalf("page of a disabled person = %d, want 303 to the sign-in form", rec.Code)
		}
	})
	t.Run("IdentityDown", func(t *testing.T) {
		a.now = time.Now
		ck, _ := signIn(t, user, pw)
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		real := a.idp
		a.idp = identity.New(down.URL, "", time.Second)
		defer func() { a.idp = real }()
		if rec := get(ck); rec.Code != http.StatusNoContent {
			t.Fatalf("page with identity down and the access token valid = %d, want 204", rec.Code)
		}
		a.now = later
		if rec := get(ck); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("page with identity down and the access token expired = %d, want 503 with Retry-After (fail closed)", rec.Code)
		}
	})
}
