package webui

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"threatview/admininterface/broker"
	"threatview/admininterface/internal/browsertest"
	"threatview/admininterface/upstream"
	"threatview/platform/mq"
	"threatview/platform/testenv"
)

// TestBrowser_Pages opens every page in Chromium (services faked, broker
// real) and checks what a person with a keyboard or a phone meets: every
// field labelled, Tab reaching the skip link first, nothing wider than a
// phone screen, no console error (a CSP violation is one), and Secure
// cookies kept on http://127.0.0.1.
func TestBrowser_Pages(t *testing.T) {
	browsertest.MustChromium(t)
	if os.Getenv("STOMP_ADDR") == "" && !testenv.Required() {
		t.Skip("STOMP_ADDR not set")
	}
	h := newHarness(t)
	h.srv.opts.SecureCookies = true
	cfg := testenv.MustBroker(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := mq.NewPublisher(cfg, log)
	t.Cleanup(func() { pub.Close() })
	h.srv.deps.Broker = broker.New(cfg, pub, log)
	h.srv.opts.Targets = []Target{{Name: "collector", Client: upstream.New(h.ui.URL, nil, 0)}}
	h.fake.audit = auditRecords(120)
	h.srv.deps.Retention = []RetentionReader{fakeRetention{}}
	h.fake.tokens = append(h.fake.tokens, upstream.NewToken{Token: upstream.Token{ID: "00000000-0000-4000-8000-000000000001", AppID: "shop-app", Name: "ci", Active: true}})
	erasure := upstream.Erasure{ID: "0190a8c2-6f7e-7c3a-9b1d-000000000001", AppID: "shop-app", DeviceID: "a-rather-long-device-identifier-0123456789abcdef",
		Suppress: true, Status: "done", RequestedBy: "ada", Report: upstream.ErasureReport{EventsDeleted: 12,
			ArchivesRewritten: []upstream.ArchiveRewrite{{Table: "events.events", Month: "2026-10", RowsRemoved: 3, Rows: 997,
				ContentSHA256: strings.Repeat("ab", 32), OldLocation: "s3://threatview-archive/events.events/2026-10/v1/", Location: "s3://threatview-archive/events.events/2026-10/v2/"}},
			Verification: &upstream.ErasureVerification{Clean: true}}}
	fp := &fakePrivacy{erasures: []upstream.Erasure{erasure}, suppressions: []upstream.Suppression{{AppID: "shop-app", DeviceID: erasure.DeviceID, ErasureID: erasure.ID}}}
	ps := httptest.NewServer(fp)
	t.Cleanup(ps.Close)
	h.srv.deps.Privacy = upstream.Privacy{Client: upstream.New(ps.URL, nil, 0)}

	w := browsertest.New(t, h.ui.URL)
	w.Open("/login", "#username")
	w.SignIn("ada", "pw-ada") // fails unless the Secure, __Host- cookie was kept

	pages := []struct{ path, waitFor string }{
		{"/dashboards", "main img"}, {"/tokens", "#app_id"}, {"/tokens?q=shop", "#q"}, {"/tokens/apps/shop-app", "#tokens-h"}, {"/tokens/00000000-0000-4000-8000-000000000001/revoke", `button[name="confirm"]`},
		{"/audit?searched=1&from=2026-11-30T00:00", "main table"}, {"/status", "main table"}, {"/dlq", "main section"},
		{"/retention", "main table"}, {"/privacy", "#app_id"}, {"/privacy/erasures/" + erasure.ID, "#erasure-status"},
		{"/", "#home-map"}, {"/events?period=7d", "#events"}, {"/timelines/device/dev-1", "#timeline"}, {"/reports/threats/root", "#r-events"},
		{"/reports/categories/platform-integrity", "#c-sightings"}, {"/users", "#people"}, {"/users/ann", "#person"}, {"/profile", "#profile-form"},
	}
	const unlabelled = `[...document.querySelectorAll('input:not([type=hidden]),select,textarea')]` +
		`.filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.name || e.id).join(',')`
	for _, width := range []int64{1280, 390} {
		w.Do("viewport", chromedp.EmulateViewport(width, 800))
		for _, p := range pages {
			w.Open(p.path, p.waitFor)
			if got := browsertest.Eval[string](w, unlabelled); got != "" {
				t.Errorf("%s: fields without a label: %s", p.path, got)
			}
			w.Do("tab", chromedp.KeyEvent("\t"))
			if got := browsertest.Eval[string](w, `document.activeElement.className`); got != "skip" {
				t.Errorf("%s: the first Tab focuses %q, want the skip link", p.path, got)
			}
			if over := browsertest.Eval[bool](w, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
				wide := browsertest.Eval[string](w, `[...document.querySelectorAll('body *')].filter(e => (e.matches('.scroll') || !e.closest('.scroll')) && e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 5).map(e => e.tagName + '.' + e.className + '#' + e.id + ':' + Math.round(e.getBoundingClientRect().right) + '/' + window.innerWidth + '/' + document.documentElement.scrollWidth).join(' ')`)
				t.Errorf("%s at %d px: the page is wider than the screen: %s", p.path, width, wide)
			}
		}
	}
	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
