package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"threatview/platform/httpserver"
	"threatview/platform/testenv"
	"threatview/visualrenderer"
	"threatview/visualrenderer/httpapi"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

// chromium is Debian's browser, which scripts/stack.sh installs.
const chromium = "/usr/bin/chromium"

// browser is one headless Chromium tab and what its console said.
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	log []chromedp.ConsoleMessage
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := exec.LookPath(chromium); err != nil {
		if testenv.Required() {
			t.Fatalf("%s is missing: scripts/stack.sh install puts it there", chromium)
		}
		t.Skipf("%s is missing", chromium)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 800), chromedp.UserDataDir(t.TempDir()))
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	b := &browser{t: t, ctx: ctx}
	// The first action starts the browser: it must run on the tab's own
	// context, since the browser lives as long as the context it starts in.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.log = append(b.log, m)
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v (at %s)", what, err, b.location())
	}
}

func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v (at %s)", what, err, b.location())
	}
	return v
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	l, _ := chromedp.Run(ctx, chromedp.Location())
	return l
}

// waitURL waits until the tab's URL contains every part (a navigation
// the last click started has landed), then for sel to be visible.
func (b *browser) waitURL(sel string, parts ...string) {
	b.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		l, ok := b.location(), true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the URL is %s, want %v in it", l, parts)
		}
	}
	b.do("wait for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(run(b, "text of "+sel, chromedp.Text(chromedp.CSS(sel))))
}

// shot saves the viewport as docs/renderer/NAME.png with
// THREATVIEW_UPDATE_SCREENSHOTS=1, else in a temporary directory.
func (b *browser) shot(name string) {
	b.t.Helper()
	png := run(b, "screenshot "+name, chromedp.CaptureScreenshot())
	dir := b.t.TempDir()
	if os.Getenv("THREATVIEW_UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join(testenv.Root(b.t), "docs", "renderer")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// errors returns what the console said at level error (CSP violations,
// failed loads, exceptions).
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.log {
		if m.Type == "error" || m.Type == chromedp.ConsoleException {
			out = append(out, string(m.Type)+": "+m.Text)
		}
	}
	return out
}

// TestDashboard_Browser walks the dashboards as a person would: signs in
// with a username and password (at identity), reads the totals and tables, changes the app and the
// range, follows a link to a dimension page, uses the keyboard, and checks
// every number shown against the stats API.
func TestDashboard_Browser(t *testing.T) {
	dbURL, pool := rtest.MustEventsDB(t)
	to := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	rtest.Seed(t, pool, rtest.Synthetic{Apps: []string{"bank-app", "shop-android", "shop-ios"}, From: to.AddDate(0, -13, 0), To: to, MaxPerHour: 3})
	store, err := postgres.Open(context.Background(), dbURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	idURL, idKey := rtest.MustIdentity(t)
	user, pw := rtest.MustPerson(t, idURL, idKey, "analyst")
	auth := httpapi.NewIdentityAuth(idURL, "", adminKey, true, log)
	srv := httptest.NewServer(httpapi.New(store, auth, httpserver.NewRegistry(), nil, log))
	t.Cleanup(srv.Close)

	api := func(path string) visualrenderer.Stats {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s visualrenderer.Stats
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
		return s
	}
	b := newBrowser(t)
	// check compares the overview's numbers with the API for the same query
	// (the footer's JSON link carries it).
	check := func(wantApp string) {
		t.Helper()
		href := run(b, "JSON link", chromedp.AttributeValue(chromedp.CSS("footer a"), "href"))
		u, err := url.Parse(href.Value)
		if err != nil || u.Path != "/v1/stats/country" {
			t.Fatalf("footer link %q, want /v1/stats/country?...", href.Value)
		}
		if got := u.Query().Get("app_id"); got != wantApp {
			t.Fatalf("page query app_id = %q, want %q (link %s)", got, wantApp, href.Value)
		}
		countries := api(u.String())
		threats := api(strings.Replace(u.String(), "/country", "/threat", 1))
		models := api(strings.Replace(u.String(), "/country", "/device_model", 1))
		if countries.Total == 0 || threats.Total == 0 {
			t.Fatalf("the seeded range is empty: %d events, %d threat sightings", countries.Total, threats.Total)
		}
		for sel, want := range map[string]int64{
			"#total-events": countries.Total, "#total-threats": threats.Total, "#count-countries": int64(len(countries.Series)),
			"#count-models": int64(len(models.Series)), "#count-threats": int64(len(threats.Series)),
			"#top-countries tbody tr:first-child td:nth-child(3)": countries.Series[0].Total,
			"#top-threats tbody tr:first-child td:nth-child(3)":   threats.Series[0].Total,
		} {
			if got := b.text(sel); got != strconv.FormatInt(want, 10) {
				t.Errorf("%s shows %q, the API says %d", sel, got, want)
			}
		}
		if got, want := b.text("#top-countries tbody tr:first-child th"), countries.Series[0].Key; got != want {
			t.Errorf("top country shown %q, the API says %q", got, want)
		}
		var broken []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			broken = run(b, "images", chromedp.Evaluate[[]string](`Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)`))
			if len(broken) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(broken) > 0 {
			t.Errorf("charts did not load: %v", broken)
		}
	}

	b.do("open the dashboard", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#username")))
	b.shot("signin")
	b.do("sign in", chromedp.SendKeys(chromedp.CSS("#username"), user), chromedp.SendKeys(chromedp.CSS("#password"), pw),
		chromedp.Click(chromedp.CSS("#signin")), chromedp.WaitVisible(chromedp.CSS("#total-events")))
	check("")
	b.shot("dashboard")

	b.do("filter by app and range", chromedp.SetValue(chromedp.CSS("#app_id"), "shop-ios"), chromedp.SetValue(chromedp.CSS("#range"), "7d"),
		chromedp.Click(chromedp.CSS("#apply")))
	b.waitURL("#total-events", "app_id=shop-ios", "range=7d")
	check("shop-ios")
	if got := strings.TrimSpace(run(b, "range shown", chromedp.TextContent(chromedp.CSS("#range option:checked")))); !strings.Contains(got, "7 days") {
		t.Errorf("range shown %q after choosing 7 days", got)
	}

	b.do("follow the threats link", chromedp.Click(chromedp.CSS(`nav a[href^="/dashboards/threat"]`)))
	b.waitURL("#dim-total", "/dashboards/threat", "app_id=shop-ios", "range=7d")
	q := url.Values{"app_id": {"shop-ios"}, "granularity": {"hour"},
		"from": {to.Add(-7 * 24 * time.Hour).Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
	if got, want := b.text("#dim-total"), api("/v1/stats/threat?"+q.Encode()).Total; got != strconv.FormatInt(want, 10) {
		t.Errorf("threat page total %q, the API says %d", got, want)
	}
	b.shot("threats")

	b.do("keyboard", chromedp.Navigate(srv.URL+"/?range=90d"), chromedp.WaitVisible(chromedp.CSS("#total-events")), chromedp.KeyEvent("\t"))
	if focused := run(b, "focus", chromedp.Evaluate[string](`document.activeElement.className`)); focused != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", focused)
	}
	b.do("choose an app with the keyboard", chromedp.Focus(chromedp.CSS("#app_id")), chromedp.KeyEvent("b"),
		chromedp.Focus(chromedp.CSS("#apply")), chromedp.KeyEvent("\r"))
	b.waitURL("#total-events", "app_id=bank-app", "range=90d")
	check("bank-app")

	b.do("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(srv.URL+"/?range=30d"),
		chromedp.WaitVisible(chromedp.CSS("#total-events")))
	if w := run(b, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Errorf("at phone width the page is %d px wide, wider than the 390 px screen", w)
	}
	b.shot("dashboard-phone")
	b.do("back to desktop", chromedp.EmulateViewport(1280, 800))

	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestSignIn_Browser: the sign-in in Chromium. A wrong password is said
// so; a crafted next (a tab, a backslash, //, encoded forms, an absolute
// URL) never takes the browser off this site after sign-in, because
// browsers drop tabs and read a backslash as a slash (/\t/evil.example
// became //evil.example); sign-out ends the session.
func TestSignIn_Browser(t *testing.T) {
	dbURL, _ := rtest.MustEventsDB(t)
	store, err := postgres.Open(context.Background(), dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	idURL, idKey := rtest.MustIdentity(t)
	user, pw := rtest.MustPerson(t, idURL, idKey, "analyst")
	srv := httptest.NewServer(httpapi.New(store, httpapi.NewIdentityAuth(idURL, "", adminKey, true, log), httpserver.NewRegistry(), nil, log))
	t.Cleanup(srv.Close)
	b := newBrowser(t)
	signIn := func(password string) {
		b.do("type the credentials", chromedp.WaitVisible(chromedp.CSS("#username")), chromedp.SendKeys(chromedp.CSS("#username"), user),
			chromedp.SendKeys(chromedp.CSS("#password"), password), chromedp.Click(chromedp.CSS("#signin")))
	}

	b.do("open the sign-in form", chromedp.Navigate(srv.URL+"/signin"))
	signIn("not-the-password-1")
	b.do("refusal shown", chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := b.text("#error"); !strings.Contains(got, "Wrong username or password") {
		t.Errorf("after a wrong password the page says %q", got)
	}
	if got := run(b, "username kept", chromedp.Evaluate[string](`document.querySelector("#username").value`)); got != user {
		t.Errorf("the username field holds %q after a refusal, want %q", got, user)
	}
	b.shot("signin-refused")
	// The refusal is a 401 page, which Chromium logs; nothing after it may.
	refusal := len(b.errors())

	for _, next := range []string{"/%09/evil.example", "/%5Cevil.example", "//evil.example", "/%2F%2Fevil.example",
		"https://evil.example/", "%2F%2Fevil.example", "/%0D%0A/evil.example", "/%5C%09evil.example"} {
		b.do("sign in with next="+next, chromedp.Navigate(srv.URL+"/signin?next="+next))
		signIn(pw)
		b.do("dashboard", chromedp.WaitVisible(chromedp.CSS("#total-events")))
		if loc := b.location(); !strings.HasPrefix(loc, srv.URL+"/") || strings.Contains(loc, "evil") {
			t.Errorf("after signing in with next=%s the browser is at %q, want this site's /", next, loc)
		}
		b.do("sign out", chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#username")))
	}
	// A local target is kept.
	b.do("sign in with a local next", chromedp.Navigate(srv.URL+"/dashboards/os?range=7d"))
	signIn(pw)
	b.waitURL("#dim-total", "/dashboards/os", "range=7d")

	// Signed out, the pages send the browser to sign in again.
	b.do("sign out", chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#username")))
	b.do("open a page", chromedp.Navigate(srv.URL+"/dashboards/os"), chromedp.WaitVisible(chromedp.CSS("#username")))
	if loc := b.location(); !strings.Contains(loc, "/signin?next=") {
		t.Errorf("after sign-out a page led to %q, want the sign-in form", loc)
	}
	if errs := b.errors()[refusal:]; len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
