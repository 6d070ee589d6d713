package webui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"threatview/admininterface/internal/browsertest"
	"threatview/platform/httpserver"
)

// TestBrowser_SignInRedirectAndThrottle signs in in Chromium from links
// carrying hostile next targets (the browser, not the server, decides where
// "/\t/evil.example" goes: it drops the tab and reads //evil.example), and
// shows a throttled sign-in as a person meets it (saved as
// login-throttled.png).
func TestBrowser_SignInRedirectAndThrottle(t *testing.T) {
	browsertest.MustChromium(t)
	h, stub, _ := newStubbedHarness(t, Options{})
	h.srv.opts.SecureCookies = true
	ui, _ := url.Parse(h.ui.URL)
	for _, next := range []string{"/\t/evil.example/", `/\evil.example/`, "//evil.example/", "/%2F%2Fevil.example/", "https://evil.example/"} {
		w := browsertest.New(t, h.ui.URL)
		w.Open("/login?next="+url.QueryEscape(next), "#username")
		w.SignIn("ada", "pw-ada")
		if loc, _ := url.Parse(w.Location()); loc == nil || loc.Host != ui.Host {
			t.Errorf("signed in from a link with next=%q, the browser went to %s", next, w.Location())
		}
	}

	stub.login = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "840")
		httpserver.WriteError(w, http.StatusTooManyRequests, "throttled", "too many failed sign-ins; try again later", nil)
	}
	w := browsertest.New(t, h.ui.URL)
	w.Refused = append(w.Refused, "/login")
	w.Open("/login", "#username")
	w.Do("sign in while throttled", chromedp.SendKeys(chromedp.CSS("#username"), "ada"), chromedp.SendKeys(chromedp.CSS("#password"), "pw-ada"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`p.error[role="alert"]`)))
	if got := w.Text("p.error"); !strings.Contains(got, "Too many failed sign-ins") || !strings.Contains(got, "14 minutes") {
		t.Errorf("the throttled sign-in page says %q, want why and the wait", got)
	}
	w.Shot("login-throttled")
	for _, width := range []int64{390} {
		w.Do("phone width", chromedp.EmulateViewport(width, 800))
		if over := browsertest.Eval[bool](w, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
			t.Errorf("the throttled sign-in page is wider than a %d px screen", width)
		}
	}
}
