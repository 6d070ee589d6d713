// Package browsertest drives Debian's Chromium through chromedp for the
// admin interface's browser tests: one tab, console messages collected,
// screenshots saved.
package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"threatview/platform/testenv"
)

// Chromium is Debian's browser, which scripts/stack.sh installs.
const Chromium = "/usr/bin/chromium"

// MustChromium skips (or under make test fails) when Chromium is missing.
func MustChromium(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(Chromium); err != nil {
		if testenv.Required() {
			t.Fatalf("%s is missing: scripts/stack.sh install puts it there", Chromium)
		}
		t.Skipf("%s is missing", Chromium)
	}
}

// Walker drives one browser tab of Debian's Chromium and remembers what
// the console said.
type Walker struct {
	t   *testing.T
	ctx context.Context
	// Base is the site's URL.
	Base     string
	shotsDir string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
	// Refused lists the pages the walk expects the server to refuse; the
	// browser logs their status as a network error, which is expected.
	Refused []string
}

// New starts a headless Chromium at 1280×800 for a site at base.
// Screenshots go to a temporary directory, or to docs/ui/ with
// THREATVIEW_UPDATE_SCREENSHOTS=1.
func New(t *testing.T, base string) *Walker {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	w := &Walker{t: t, ctx: ctx, Base: base, shotsDir: t.TempDir()}
	if os.Getenv("THREATVIEW_UPDATE_SCREENSHOTS") == "1" {
		w.shotsDir = filepath.Join(testenv.Root(t), "docs", "ui")
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			w.mu.Lock()
			w.console = append(w.console, m)
			w.mu.Unlock()
		}
	}()
	return w
}

// Do runs steps with a 30 s timeout; an error fails the test.
func (w *Walker) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		w.t.Fatalf("%s: %v (at %s)", what, err, w.Location())
	}
}

// WaitLocation waits until the tab's URL contains substr and its document
// has loaded: a click that submits a form returns before the browser has
// navigated, and the old page may already show what the new one will.
func (w *Walker) WaitLocation(substr string) {
	w.t.Helper()
	expr := fmt.Sprintf(`location.href.includes(%q) && document.readyState === "complete"`, substr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// An evaluation that meets the navigation fails; ask again.
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("waiting for a URL with %q: %v (at %s)", substr, err, w.Location())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Location is the tab's URL.
func (w *Walker) Location() string {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	l, _ := chromedp.Run(ctx, chromedp.Location())
	return l
}

// Text is the visible text of the first element matching sel.
func (w *Walker) Text(sel string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		w.t.Fatalf("text of %s: %v (at %s)", sel, err, w.Location())
	}
	return s
}

// Value is the value of the form field matching sel.
func (w *Walker) Value(sel string) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		w.t.Fatalf("value of %s: %v", sel, err)
	}
	return s
}

// Open loads path and waits for waitFor to be visible.
func (w *Walker) Open(path, waitFor string) {
	w.t.Helper()
	w.Do("open "+path, chromedp.Navigate(w.Base+path), chromedp.WaitVisible(chromedp.CSS(waitFor)))
}

// ShotMaxHeight caps a screenshot's height in CSS pixels (two 1280×800
// screens): a long list is shown by its first screens, not as one
// unreadable strip.
const ShotMaxHeight = 1600

// Shot saves a PNG of the page from its top, at the viewport's width and
// as tall as the page but at most ShotMaxHeight, as name.png.
func (w *Walker) Shot(name string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.Action[[]byte](func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		size, err := chromedp.Evaluate[[]float64](`[window.innerWidth, document.documentElement.scrollHeight]`)(ctx, t)
		if err != nil {
			return nil, err
		}
		if len(size) != 2 {
			return nil, fmt.Errorf("page size %v", size)
		}
		beyond, fromSurface := true, true
		r, err := cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format: page.CaptureScreenshotFormatPng, CaptureBeyondViewport: &beyond, FromSurface: &fromSurface,
			Clip: &page.Viewport{Width: size[0], Height: min(size[1], ShotMaxHeight), Scale: 1},
		})
		if err != nil {
			return nil, err
		}
		return r.Data, nil
	}))
	if err != nil {
		w.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(w.shotsDir, name+".png"), png, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// Eventually reloads path until check passes, for at most d.
func (w *Walker) Eventually(d time.Duration, path, waitFor, what string, check func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for {
		w.Open(path, waitFor)
		if check() {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not seen within %s (at %s)", what, d, w.Location())
		}
		time.Sleep(time.Second)
	}
}

// SignIn signs in through the sign-in form.
func (w *Walker) SignIn(user, password string) {
	w.t.Helper()
	w.Open("/login", "#username")
	w.Do("sign in as "+user,
		chromedp.SendKeys(chromedp.CSS("#username"), user), chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Main"]`)))
}

// SignOut presses the sign-out button.
func (w *Walker) SignOut() {
	w.t.Helper()
	w.Do("sign out", chromedp.Click(chromedp.CSS("form.signout button")), chromedp.WaitVisible(chromedp.CSS("#username")))
}

// CookieClient returns an HTTP client and the browser's cookies, for the
// downloads a browser would save to disk.
func (w *Walker) CookieClient() (*http.Client, string) {
	w.t.Helper()
	var header []string
	w.Do("read cookies", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{w.Base + "/"}})
		if err != nil {
			return err
		}
		for _, c := range res.Cookies {
			header = append(header, c.Name+"="+c.Value)
		}
		return nil
	}))
	return &http.Client{Timeout: 30 * time.Second}, strings.Join(header, "; ")
}

// ConsoleErrors lists the console errors and exceptions so far, without
// the network errors of pages in Refused.
func (w *Walker) ConsoleErrors() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
next:
	for _, m := range w.console {
		if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
			continue
		}
		if m.Source == "network" {
			for _, p := range w.Refused {
				if strings.HasPrefix(m.URL, w.Base+p) {
					continue next
				}
			}
		}
		out = append(out, m.String()+" @ "+m.URL)
	}
	return out
}

// Eval evaluates a JavaScript expression in the page (through DevTools, so
// the page's CSP does not apply) and returns its value.
func Eval[T any](w *Walker, expr string) T {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		w.t.Fatalf("evaluate %.60q: %v", expr, err)
	}
	return v
}

// TabTo presses Tab (at most 400 times) until the element matching sel
// has the focus, as a keyboard-only person reaches it; it fails when Tab
// never gets there.
func (w *Walker) TabTo(sel string) {
	w.t.Helper()
	expr := fmt.Sprintf(`(function(){var e=document.querySelector(%q);return !!e && document.activeElement===e;})()`, sel)
	for i := 0; i < 400; i++ {
		if Eval[bool](w, expr) {
			return
		}
		w.Do("press Tab", chromedp.KeyEvent("\t"))
	}
	w.t.Fatalf("Tab never reaches %s (at %s)", sel, w.Location())
}

// Type tabs to the field sel and types text into it (after clearing it
// with the keyboard).
func (w *Walker) Type(sel, text string) {
	w.t.Helper()
	w.TabTo(sel)
	Eval[bool](w, `(document.activeElement.select && document.activeElement.select(), true)`)
	w.Do("type into "+sel, chromedp.KeyEvent("\b"), chromedp.KeyEvent(text))
}

// Press tabs to sel and presses Enter on it (a link or a button).
func (w *Walker) Press(sel string) {
	w.t.Helper()
	w.TabTo(sel)
	w.Do("press Enter on "+sel, chromedp.KeyEvent("\r"))
}

// Choose tabs to the select sel and picks the option with value by
// typing its first letters, as a keyboard does.
func (w *Walker) Choose(sel, value string) {
	w.t.Helper()
	w.TabTo(sel)
	w.Do("first option of "+sel, chromedp.KeyEvent(kb.Home))
	for i := 0; i < 20 && w.Value(sel) != value; i++ {
		w.Do("arrow down in "+sel, chromedp.KeyEvent(kb.ArrowDown))
	}
	if w.Value(sel) != value {
		w.t.Fatalf("%s: cannot pick %q with the arrow keys", sel, value)
	}
}

// ShotBoth saves name.png at 1280×800 and name-375.png at a phone's
// 375×800, and checks that the page does not scroll sideways on the phone.
func (w *Walker) ShotBoth(name string) {
	w.t.Helper()
	w.Shot(name)
	w.Do("phone width", chromedp.EmulateViewport(375, 800))
	over := Eval[bool](w, `document.documentElement.scrollWidth > window.innerWidth + 1`)
	w.Shot(name + "-375")
	w.Do("desktop width", chromedp.EmulateViewport(1280, 800))
	if over {
		w.t.Errorf("%s scrolls sideways at 375 px", name)
	}
}
