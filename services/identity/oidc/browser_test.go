package oidc_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"threatview/identity"
	"threatview/identity/httpapi"
	"threatview/identity/mariadb"
	"threatview/identity/oidc"
	"threatview/migrations"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
)

// chromium is Debian's browser, which scripts/stack.sh installs.
const chromium = "/usr/bin/chromium"

// uiStack is identity (in this process, on a fresh database) and the admin
// interface (its real binary) in front of it, both on 127.0.0.1, with a real
// OpenID provider on 127.0.0.2: another site, as a company's provider is.
type uiStack struct {
	ui, identity, issuer string
	store                *mariadb.Store
	svc                  *identity.Service
	who                  string
	uiLog                *testenv.SyncBuffer
}

type stackOptions struct {
	accessTTL time.Duration
	// slowRefresh delays identity's answer to POST /v1/refresh, so two
	// page loads renewing at once overlap for certain.
	slowRefresh time.Duration
}

func startUIStack(t *testing.T, o stackOptions) *uiStack {
	t.Helper()
	if _, err := exec.LookPath(chromium); err != nil {
		if testenv.Required() {
			t.Fatalf("%s is missing: scripts/stack.sh install puts it there", chromium)
		}
		t.Skipf("%s is missing", chromium)
	}
	dsn := testenv.MustMariaDB(t)
	db, err := mariadb.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(context.Background(), db, migrations.Identity); err != nil {
		t.Fatal(err)
	}
	st := &uiStack{store: mariadb.New(db)}
	uiAddr := testenv.FreeAddr(t, "127.0.0.1")
	st.ui = "http://" + uiAddr
	st.issuer = providerAt(t, "127.0.0.2", st.ui+"/login/oidc/callback", &st.who, true)

	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	keys, _ := identity.ParseKeyring(hex.EncodeToString(seed))
	hasher, _ := identity.NewHasher(identity.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}, 2)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	st.svc = identity.NewService(st.store, hasher, keys, nil, identity.Options{AccessTTL: o.accessTTL, RefreshGrace: 10 * time.Second}, log)
	roleMap, _ := identity.ParseRoleMap("tv-admins=admin, tv-analysts=analyst, tv-auditors=auditor")
	client := oidc.New(oidc.Config{Issuer: st.issuer, ClientID: "threatview", ClientSecret: "client-secret",
		RedirectURL: st.ui + "/login/oidc/callback", Scopes: []string{"openid", "profile", "email"}, RoleMap: roleMap}, st.store, nil, log)
	api := httpapi.New(st.svc, httpapi.Options{OIDC: client}, httpserver.NewRegistry(), nil, log)
	id := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/refresh" && o.slowRefresh > 0 {
			time.Sleep(o.slowRefresh)
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(id.Close)
	st.identity = id.URL

	ui := testenv.StartAdminInterface(t, uiAddr, st.identity,
		"ADMINUI_SECURE_COOKIES=true", "ADMINUI_OIDC=true")
	st.uiLog = ui.Log
	return st
}

// newBrowser starts a headless Chromium; the context is its first tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true), chromedp.Flag("disable-backgrounding-occluded-windows", true), chromedp.WindowSize(1280, 800), chromedp.UserDataDir(t.TempDir()))
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs actions in tab with a bound, failing with what the tab shows.
func run(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\nthe tab shows %s", what, err, shows(tab))
	}
}

// shows is the tab's address and text, for failure messages.
func shows(tab context.Context) string {
	ctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if len(text) > 600 {
		text = text[:600]
	}
	return loc + ":\n" + text
}

// signedInAt navigates tab to path and reports whether it shows the page
// signed in (the main navigation) rather than the sign-in form.
func signedInAt(t *testing.T, tab context.Context, path string) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(path), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	nav, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('nav[aria-label="Main"]') && !document.querySelector('#password')`))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return nav, loc
}

// TestBrowser_OIDCSignIn signs in through the company's provider in
// Chromium, with the provider on another site than the UI, as in every real
// deployment: the provider's redirect back must find the sign-in's state,
// and following a link to the UI from another site must leave the person
// signed in.
func TestBrowser_OIDCSignIn(t *testing.T) {
	st := startUIStack(t, stackOptions{})
	st.who = "olga"
	tab := newBrowser(t)
	run(t, tab, "open the sign-in page", chromedp.Navigate(st.ui+"/login"), chromedp.WaitVisible(chromedp.CSS(`a[href="/login/oidc"]`)))
	run(t, tab, "go to the company's sign-in", chromedp.Click(chromedp.CSS(`a[href="/login/oidc"]`)), chromedp.WaitVisible(chromedp.CSS("#signin")))
	run(t, tab, "sign in there", chromedp.Click(chromedp.CSS("#signin")), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Main"]`)))
	if got := shows(tab); !strings.Contains(got, "olga") {
		t.Fatalf("after the company sign-in the page does not name olga: %s", got)
	}
	// A link on another site (the provider's host) to a page of the UI.
	run(t, tab, "open a page of another site", chromedp.Navigate(st.issuer+"/elsewhere?to="+st.ui+"/dashboards"), chromedp.WaitVisible(chromedp.CSS("#go")))
	run(t, tab, "follow its link to the UI", chromedp.Click(chromedp.CSS("#go")), chromedp.WaitReady(chromedp.CSS("body")))
	if ok, loc := signedInAt(t, tab, st.ui+"/dashboards"); !ok {
		t.Fatalf("after following a link from another site the person is signed out (%s): %s", loc, shows(tab))
	}
	if strings.Contains(st.uiLog.String(), "code=") || strings.Contains(st.uiLog.String(), "state=") {
		t.Errorf("the admin interface logged the callback's code or state:\n%s", st.uiLog.String())
	}
}

// TestBrowser_TwoTabsRefreshAtOnce: two tabs load a page at the same moment
// when the access token needs renewing; both present the same refresh
// token to identity. Neither may sign the person out.
func TestBrowser_TwoTabsRefreshAtOnce(t *testing.T) {
	// Access tokens shorter than the UI's renewal margin: every page load
	// renews. Identity answers renewals slowly, so the two overlap.
	st := startUIStack(t, stackOptions{accessTTL: 20 * time.Second, slowRefresh: 500 * time.Millisecond})
	if _, err := st.svc.CreateUser(context.Background(), identity.NewUser{Username: "tess", Password: "two tabs password", Roles: []string{"analyst"}}, identity.Meta{Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	tab1 := newBrowser(t)
	run(t, tab1, "sign in", chromedp.Navigate(st.ui+"/login"), chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "tess"), chromedp.SendKeys(chromedp.CSS("#password"), "two tabs password"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Main"]`)))
	tab2, cancel := chromedp.NewContext(tab1) // a second tab of the same browser
	defer cancel()
	// The first action on a tab opens it, bound to the context it runs
	// with: this one, not a shorter one.
	if err := chromedp.Do(tab2, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	if ok, loc := signedInAt(t, tab2, st.ui+"/dashboards"); !ok {
		t.Fatalf("the second tab is not signed in (%s)", loc)
	}
	for round := range 3 {
		// Both tabs start loading before either answer is back (identity
		// takes 500 ms to renew), so both present the same refresh token.
		target := fmt.Sprintf("%s/dashboards?round=%d", st.ui, round)
		for i, tab := range []context.Context{tab1, tab2} {
			run(t, tab, fmt.Sprintf("tab %d: start loading", i+1), chromedp.Evaluate[chromedp.Void](fmt.Sprintf("setTimeout(() => { location.href = %q }, 0)", target)))
		}
		for i, tab := range []context.Context{tab1, tab2} {
			deadline := time.Now().Add(20 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(tab, 5*time.Second)
				state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " " + document.readyState + " " + !!document.querySelector('nav[aria-label="Main"]')`))
				cancel()
				if err == nil && strings.HasSuffix(state, " complete true") && strings.HasPrefix(state, target) {
					break
				}
				if err == nil && strings.HasSuffix(state, " complete false") && !strings.HasPrefix(state, target) && strings.Contains(state, "/login") {
					t.Fatalf("round %d: tab %d was signed out: %s", round, i+1, shows(tab))
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: tab %d did not load %s: %q %v", round, i+1, target, state, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if ok, loc := signedInAt(t, tab1, st.ui+"/dashboards"); !ok {
		t.Fatalf("after the tabs renewed at once, the person is signed out (%s)", loc)
	}
}
