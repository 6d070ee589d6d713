package webui

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"threatview/admininterface/internal/browsertest"
	"threatview/platform/wire"
)

// TestBrowser_DLQReplayAll replays a whole dead-letter queue in Chromium:
// the confirmation, then the page that reports progress while the replay
// runs and ends with the count; readable at phone width, no console error.
func TestBrowser_DLQReplayAll(t *testing.T) {
	browsertest.MustChromium(t)
	h := newHarness(t)
	h.srv.opts.SecureCookies = true
	pub, events, _ := withBroker(t, h)
	const n = 120
	mustDeadLetter(t, pub, events, n)

	w := browsertest.New(t, h.ui.URL)
	w.Open("/login", "#username")
	w.SignIn("ada", "pw-ada")
	w.Open("/dlq", "main section")
	w.Do("replay all", chromedp.Click(chromedp.CSS(`a.button[href="/dlq/events/replay"]`)), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	w.Do("confirm", chromedp.Click(chromedp.CSS(`button[name="confirm"]`)), chromedp.WaitVisible(chromedp.CSS(`p[role="status"]`)))
	if got := w.Text(`p[role="status"]`); !strings.Contains(got, "Done: 120 message(s) replayed.") {
		t.Fatalf("the replay page ends with %q", got)
	}
	w.Shot("dlq-replay-all")
	if d := depth(t, h, wire.DeadLetter(events)); d != 0 {
		t.Errorf("the DLQ holds %d messages after replay all", d)
	}
	w.Do("phone width", chromedp.EmulateViewport(390, 800))
	if over := browsertest.Eval[bool](w, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
		t.Errorf("the replay page is wider than a phone screen")
	}
	w.Do("back", chromedp.Click(chromedp.CSS(`main a.button[href="/dlq"]`)), chromedp.WaitVisible(chromedp.CSS("main section")))
	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
