package webui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"threatview/admininterface/internal/browsertest"
	"threatview/admininterface/upstream"
)

// fakeTrail is the audit logger's tamper-evidence API as the page uses it.
type fakeTrail struct {
	mu       sync.Mutex
	report   upstream.TrailReport
	verifies int
	bearers  []string
}

func (f *fakeTrail) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bearers = append(f.bearers, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	cp := upstream.TrailCheckpoint{N: 42, Size: 1234, Root: make([]byte, 32), Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), KeyID: "0784bf843f6eb887"}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/audit": // the auditor's home page after signing in
		json.NewEncoder(w).Encode(map[string]any{"records": []any{}, "next_cursor": ""})
	case "/v1/audit/checkpoints":
		json.NewEncoder(w).Encode(map[string]any{"checkpoints": []any{cp}, "latest": cp})
	case "/v1/audit/verify":
		f.verifies++
		rep := f.report
		rep.Checkpoint = &cp
		json.NewEncoder(w).Encode(rep)
	default:
		http.NotFound(w, r)
	}
}

func newTrailHarness(t *testing.T) (*harness, *fakeTrail) {
	h := newHarness(t)
	ft := &fakeTrail{report: upstream.TrailReport{OK: true, Checked: 1234, Problems: []upstream.TrailProblem{}}}
	srv := httptest.NewServer(ft)
	t.Cleanup(srv.Close)
	h.srv.deps.Audit = upstream.Audit{Client: upstream.New(srv.URL, nil, 5*time.Second)}
	return h, ft
}

func TestTrailPage(t *testing.T) {
	h, ft := newTrailHarness(t)
	t.Run("ErrForbidden analyst", func(t *testing.T) {
		b := h.browser(t)
		b.signIn("ann")
		if resp, _ := b.do("GET", "/audit/trail", nil); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("analyst GET /audit/trail = %d, want 403", resp.StatusCode)
		}
	})
	t.Run("ErrCSRF", func(t *testing.T) {
		b := h.browser(t)
		b.signIn("aud")
		if resp, _ := b.do("POST", "/audit/trail/verify", nil); resp.StatusCode != http.StatusForbidden || ft.verifies != 0 {
			t.Fatalf("POST without the CSRF token = %d (verifications %d), want 403 and none", resp.StatusCode, ft.verifies)
		}
	})
}

// TestTrailPage_Unanchored: a verification whose only finding is that no
// checkpoint outside the database anchored it is its own state, neither
// "verified" nor a list of tampered rows, with what it means and what to do;
// unanchored beside real problems says both.
func TestTrailPage_Unanchored(t *testing.T) {
	h, ft := newTrailHarness(t)
	unanchored := upstream.TrailProblem{ID: "checkpoints", Kind: "unanchored",
		Detail: "no correctly signed checkpoint outside the database: the database alone cannot show it was not rewritten"}
	b := h.browser(t)
	csrf := b.signIn("aud")
	ft.mu.Lock()
	ft.report = upstream.TrailReport{OK: false, Checked: 1234, Problems: []upstream.TrailProblem{unanchored}}
	ft.mu.Unlock()
	resp, page := b.do("POST", "/audit/trail/verify", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /audit/trail/verify = %d", resp.StatusCode)
	}
	for _, want := range []string{`id="trail-state" class="warn" data-state="unanchored"`, "Unanchored:", "1234 rows checked",
		"no correctly signed checkpoint outside the database", "AUDIT_TRAIL_S3_BUCKET"} {
		if !strings.Contains(page, want) {
			t.Errorf("unanchored verification: page lacks %q:\n%.4000s", want, page)
		}
	}
	for _, bad := range []string{"found 1 problems", `<td class="bad">unanchored</td>`, "Verified up to"} {
		if strings.Contains(page, bad) {
			t.Errorf("unanchored verification: page shows %q:\n%.4000s", bad, page)
		}
	}

	ft.mu.Lock()
	ft.report = upstream.TrailReport{OK: false, Checked: 1234, Problems: []upstream.TrailProblem{unanchored,
		{ID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", Kind: "modified", Detail: "its fields do not hash to the signed leaf"}}}
	ft.mu.Unlock()
	_, page = b.do("POST", "/audit/trail/verify", url.Values{"csrf": {csrf}})
	for _, want := range []string{`id="trail-state" class="bad" data-state="problems"`, "found 1 problem", "also unanchored", `<td class="bad">modified</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("unanchored and modified: page lacks %q:\n%.4000s", want, page)
		}
	}
}

// TestBrowser_TrailPage walks the trail page as an auditor: the state, a
// verification that passes, one that names problems; screenshots in docs/ui.
func TestBrowser_TrailPage(t *testing.T) {
	browsertest.MustChromium(t)
	h, ft := newTrailHarness(t)
	w := browsertest.New(t, h.ui.URL)
	w.SignIn("aud", "pw-aud")
	w.Open("/audit/trail", "main form button")
	if got := w.Text("main"); !strings.Contains(got, "Newest signed checkpoint: number 42, 1234 rows") {
		t.Errorf("page shows %q, want the newest checkpoint", got)
	}
	if got := browsertest.Eval[string](w, `[...document.querySelectorAll('nav [aria-current="page"]')].map(a => a.getAttribute('href')).join(',')`); got != "/audit/trail" {
		t.Errorf("current navigation links %q, want /audit/trail alone", got)
	}
	w.Do("verify now", chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("main p.ok")))
	if got := w.Text("main p.ok"); !strings.Contains(got, "Verified up to checkpoint 42") || !strings.Contains(got, "1234 rows checked") {
		t.Errorf("after verifying: %q", got)
	}
	w.Shot("audit-trail")

	ft.mu.Lock()
	ft.report = upstream.TrailReport{OK: false, Checked: 1234, Problems: []upstream.TrailProblem{
		{ID: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", Time: time.Date(2026, 12, 1, 5, 44, 22, 0, time.UTC), Kind: "modified", Detail: "its fields do not hash to the signed leaf at sequence number 17"},
		{ID: "checkpoint 40", Kind: "bad_signature", Detail: "bad checkpoint signature: unknown key id \"ffff\" (in the database, size 1100)"},
	}}
	ft.mu.Unlock()
	w.Do("verify again", chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("main table")))
	if got := w.Text("main table"); !strings.Contains(got, "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c") || !strings.Contains(got, "bad_signature") {
		t.Errorf("problems table: %q", got)
	}
	w.Shot("audit-trail-problems")

	ft.mu.Lock()
	ft.report = upstream.TrailReport{OK: false, Checked: 1234, Problems: []upstream.TrailProblem{{ID: "checkpoints", Kind: "unanchored",
		Detail: "no correctly signed checkpoint outside the database: the database alone cannot show it was not rewritten"}}}
	ft.mu.Unlock()
	w.Do("verify unanchored", chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`#trail-state[data-state="unanchored"]`)))
	if got := w.Text("main"); !strings.Contains(got, "Unanchored:") || !strings.Contains(got, "What this means") {
		t.Errorf("unanchored state: %q", got)
	}
	w.Shot("audit-trail-unanchored")
	w.Do("phone", chromedp.EmulateViewport(390, 800))
	w.Open("/audit/trail", "main form button")
	if over := browsertest.Eval[bool](w, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
		t.Error("the trail page is wider than a phone screen")
	}
	w.Shot("audit-trail-phone")
	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, b := range ft.bearers {
		if !strings.HasSuffix(b, "Bearer at-aud") {
			t.Errorf("audit logger called as %q, want with the auditor's token", b)
		}
	}
}
