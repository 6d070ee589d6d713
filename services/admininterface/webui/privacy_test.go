package webui

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/admininterface/upstream"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
)

// fakePrivacy is the privacy service's HTTP contract as the pages use it
// (its answers, codes and messages as services/retention/privacy sends
// them); the browser walk in cmd/admininterface drives the real one.
type fakePrivacy struct {
	mu           sync.Mutex
	known        map[string]bool
	erasures     []upstream.Erasure
	suppressions []upstream.Suppression
	calls        []string // method, path and bearer of every call
	bodies       []map[string]any
	unavailable  bool // answer 503 as the service does when its audit trail is down
	userKeys     bool // accept erasures by user id (PRIVACY_USER_ID_KEYS set)
}

// fakePseudonym is a user id's pseudonym as the service stores it (k1:<hex>).
func fakePseudonym(userID string) string {
	sum := sha256.Sum256([]byte(userID))
	return "k1:" + hex.EncodeToString(sum[:])
}

func (f *fakePrivacy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	if f.unavailable {
		w.Header().Set("Retry-After", "2")
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the audit trail is unavailable; nothing was changed", nil)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/erasures":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.bodies = append(f.bodies, body)
		app, _ := body["app_id"].(string)
		dev, _ := body["device_id"].(string)
		uid, byUser := body["user_id"].(string)
		field := func(name, msg string) {
			httpserver.WriteError(w, 422, "invalid", name+" "+msg, map[string]string{"field": name})
		}
		switch {
		case byUser && dev != "":
			field("user_id", "and device_id are given: an erasure names one device or one user, not both")
			return
		case byUser && strings.TrimSpace(uid) == "":
			field("user_id", "is empty")
			return
		case byUser && body["suppress"] == true:
			field("suppress", "cannot be true with user_id: the processor suppresses devices only, not users; leave it out or send false")
			return
		case byUser && !f.userKeys:
			field("user_id", "cannot be erased: this service has no user id key (PRIVACY_USER_ID_KEYS)")
			return
		case !byUser && strings.TrimSpace(dev) == "":
			httpserver.WriteError(w, 422, "invalid", "device_id is required", nil)
			return
		case !f.known[app]:
			httpserver.WriteError(w, 422, "unknown_app", "no data is stored for this app_id", nil)
			return
		}
		var users []string
		if byUser {
			users = []string{fakePseudonym(uid)}
		}
		for _, e := range f.erasures {
			if e.AppID == app && e.DeviceID == dev && slices.Equal(e.UserPseudonyms, users) && e.Status == "queued" {
				httpserver.WriteError(w, 409, "erasure_in_progress", "an erasure of this device or user is already queued or running", nil)
				return
			}
		}
		e := upstream.Erasure{ID: "0190a8c2-6f7e-7c3a-9b1d-00000000000" + string(rune('0'+len(f.erasures))), AppID: app, DeviceID: dev,
			UserPseudonyms: users, Suppress: body["suppress"] == true, Status: "queued", RequestedBy: "ada", RequestedAt: time.Now()}
		f.erasures = append([]upstream.Erasure{e}, f.erasures...)
		httpserver.WriteJSON(w, 202, map[string]string{"id": e.ID, "status": e.Status})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/erasures":
		httpserver.WriteJSON(w, 200, map[string]any{"erasures": f.erasures})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/erasures/"):
		for _, e := range f.erasures {
			if e.ID == strings.TrimPrefix(r.URL.Path, "/v1/erasures/") {
				httpserver.WriteJSON(w, 200, e)
				return
			}
		}
		httpserver.WriteError(w, 404, "not_found", "no such erasure or suppression", nil)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/suppressions":
		httpserver.WriteJSON(w, 200, map[string]any{"suppressions": f.suppressions})
	case r.Method == http.MethodDelete && r.URL.Path == "/v1/suppressions":
		q := r.URL.Query()
		for i, s := range f.suppressions {
			if s.AppID == q.Get("app_id") && s.DeviceID == q.Get("device_id") {
				f.suppressions = append(f.suppressions[:i], f.suppressions[i+1:]...)
				w.WriteHeader(204)
				return
			}
		}
		httpserver.WriteError(w, 404, "not_found", "no such erasure or suppression", nil)
	default:
		httpserver.WriteError(w, 404, "not_found", "no such resource", nil)
	}
}

// count returns how many calls were method path.
func (f *fakePrivacy) count(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, method+" "+path+" ") {
			n++
		}
	}
	return n
}

func newPrivacyHarness(t *testing.T) (*harness, *fakePrivacy) {
	h := newHarness(t)
	fp := &fakePrivacy{known: map[string]bool{"shop": true}}
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	h.srv.deps.Privacy = upstream.Privacy{Client: upstream.New(srv.URL, nil, 5*time.Second)}
	return h, fp
}

// TestPrivacy_Erasure walks a request: the form, its confirmation (nothing
// sent before it), the request with the person's token, the report; and
// the service's refusals shown as what they mean, with nothing requested.
func TestPrivacy_Erasure(t *testing.T) {
	h, fp := newPrivacyHarness(t)
	b := h.browser(t)
	csrf := b.signIn("ada")
	resp, page := b.do("GET", "/privacy", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `id="suppress" name="suppress" type="checkbox" value="yes" checked`) ||
		!strings.Contains(page, "No erasure has been requested yet") {
		t.Fatalf("GET /privacy = %d, want the form with suppress checked and an empty list:\n%.2000s", resp.StatusCode, page)
	}
	if !strings.Contains(page, `<a href="/privacy" aria-current="page">Privacy</a>`) {
		t.Error("the navigation does not mark Privacy as the current page")
	}
	form := url.Values{"csrf": {csrf}, "app_id": {" shop "}, "device_id": {"dev-1"}, "suppress": {"yes"}}

	t.Run("ConfirmFirst", func(t *testing.T) {
		resp, page := b.do("POST", "/privacy/erasures", form)
		if resp.StatusCode != 200 || !strings.Contains(page, "Erase every event of device “dev-1” of app “shop”?") ||
			!strings.Contains(page, "cannot be undone") || !strings.Contains(page, `name="suppress" value="yes"`) {
			t.Fatalf("POST without confirm = %d, want the confirmation:\n%.2000s", resp.StatusCode, page)
		}
		if n := fp.count("POST", "/v1/erasures"); n != 0 {
			t.Fatalf("the privacy service was asked %d times before the confirmation", n)
		}
	})
	t.Run("OK", func(t *testing.T) {
		confirmed := url.Values{"confirm": {"yes"}}
		for k, v := range form {
			confirmed[k] = v
		}
		resp, _ := b.do("POST", "/privacy/erasures", confirmed)
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/privacy/erasures/0190a8c2-") {
			t.Fatalf("confirmed POST = %d to %q, want 303 to the report", resp.StatusCode, loc)
		}
		fp.mu.Lock()
		body, call := fp.bodies[0], fp.calls[len(fp.calls)-1]
		fp.mu.Unlock()
		if body["app_id"] != "shop" || body["device_id"] != "dev-1" || body["suppress"] != true || !strings.HasSuffix(call, "Bearer at-ada") {
			t.Errorf("sent %v as %q, want shop/dev-1/suppress with the person's token", body, call)
		}
		resp, page := b.do("GET", loc, nil)
		if resp.StatusCode != 200 || !strings.Contains(page, "Erasure requested") || !strings.Contains(page, "queued") ||
			!strings.Contains(page, "Not run yet") {
			t.Errorf("report = %d:\n%.3000s", resp.StatusCode, page)
		}
	})
	for _, c := range []struct {
		name  string
		form  url.Values
		want  int
		msg   string
		sends int
	}{
		{"ErrEmptyDevice", url.Values{"app_id": {"shop"}, "device_id": {"  "}, "confirm": {"yes"}}, 400, "Enter the device id. Nothing was requested.", 0},
		{"ErrEmptyApp", url.Values{"app_id": {""}, "device_id": {"d"}}, 400, "Enter the app id.", 0},
		{"ErrUnknownApp", url.Values{"app_id": {"nope"}, "device_id": {"d"}, "confirm": {"yes"}}, 422, "No data is stored for app “nope”: check the app id. Nothing was requested.", 1},
		{"ErrInProgress", url.Values{"app_id": {"shop"}, "device_id": {"dev-1"}, "confirm": {"yes"}}, 409, "already queued or running", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := fp.count("POST", "/v1/erasures")
			c.form.Set("csrf", csrf)
			resp, page := b.do("POST", "/privacy/erasures", c.form)
			if resp.StatusCode != c.want || !strings.Contains(page, c.msg) || !strings.Contains(page, `value="`+c.form.Get("device_id")+`"`) {
				t.Errorf("POST %v = %d, want %d with %q and the form kept:\n%.2000s", c.form, resp.StatusCode, c.want, c.msg, page)
			}
			if strings.Contains(page, "answered") || strings.Contains(page, "http://") {
				t.Errorf("the page shows the service's address or raw answer:\n%.2000s", page)
			}
			if n := fp.count("POST", "/v1/erasures") - before; n != c.sends {
				t.Errorf("the privacy service was asked %d times, want %d", n, c.sends)
			}
			fp.mu.Lock()
			n := len(fp.erasures)
			fp.mu.Unlock()
			if n != 1 {
				t.Errorf("%d erasures after a refusal, want the 1 requested before", n)
			}
		})
	}
	t.Run("ErrCSRF", func(t *testing.T) {
		before := fp.count("POST", "/v1/erasures")
		f := url.Values{"app_id": {"shop"}, "device_id": {"dev-2"}, "confirm": {"yes"}, "csrf": {csrf + "x"}}
		if resp, _ := b.do("POST", "/privacy/erasures", f); resp.StatusCode != http.StatusForbidden || fp.count("POST", "/v1/erasures") != before {
			t.Errorf("POST with a wrong CSRF token = %d, want 403 and nothing sent", resp.StatusCode)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, p := range []string{"/privacy/erasures/not-a-uuid", "/privacy/erasures/0190a8c2-6f7e-7c3a-9b1d-2f4e5a6b7c8d"} {
			if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
			}
		}
	})
}

// TestPrivacy_Report shows a finished erasure's figures per store, the
// archives rewritten, the verification, and a failed one's reason.
func TestPrivacy_Report(t *testing.T) {
	h, fp := newPrivacyHarness(t)
	fin := time.Date(2026, 12, 2, 10, 0, 5, 0, time.UTC)
	fp.erasures = []upstream.Erasure{
		{ID: "0190a8c2-6f7e-7c3a-9b1d-000000000001", AppID: "shop", DeviceID: "dev-9", Suppress: true, Status: "done", RequestedBy: "ada",
			RequestedAt: fin.Add(-5 * time.Second), FinishedAt: &fin, Attempts: 1, Report: upstream.ErasureReport{
				EventsDeleted: 120, FactsDeleted: 118, RollupRowsAdjusted: 36, RollupRowsRemoved: 4, LateEventsDeleted: 2, AuditBodiesRedacted: 3,
				ArchivedMonths: []string{"2026-10"}, Suppressed: true, Seconds: 5.1, Batches: 1,
				ArchivesRewritten: []upstream.ArchiveRewrite{{Table: "events.events", Month: "2026-10", RowsRemoved: 7, Rows: 993, ContentSHA256: "ab12", OldLocation: "s3://a/old", Location: "s3://a/new"}},
				Verification:      &upstream.ErasureVerification{Clean: true}}},
		{ID: "0190a8c2-6f7e-7c3a-9b1d-000000000002", AppID: "shop", DeviceID: "dev-8", Status: "failed", RequestedBy: "ada",
			RequestedAt: fin, Attempts: 3, Error: "rewrite archive 2026-10: the archive store refused"},
	}
	fp.suppressions = []upstream.Suppression{{AppID: "shop", DeviceID: "dev-9", CreatedAt: fin, CreatedBy: "ada", ErasureID: fp.erasures[0].ID}}
	b := h.browser(t)
	b.signIn("ada")
	_, list := b.do("GET", "/privacy", nil)
	for _, want := range []string{`data-erasure="0190a8c2-6f7e-7c3a-9b1d-000000000001"`, "<td>120</td><td>3</td><td>1</td>",
		"<td>3</td><td>—</td>\n<td>rewrite archive 2026-10: the archive store refused</td>"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%.4000s", want, list)
		}
	}
	_, page := b.do("GET", "/privacy/erasures/0190a8c2-6f7e-7c3a-9b1d-000000000001", nil)
	for _, want := range []string{"<td>events (every partition)</td><td>120</td>", "<td>facts</td><td>118</td>", "<td>late events</td><td>2</td>",
		"<td>audit trail bodies</td><td>3</td>", "<td>rollups</td><td>36</td><td>adjusted, of which 4 reached 0",
		"<td>events.events</td><td>2026-10</td><td>7</td><td>993</td>", "Verified: a final count finds nothing of this device left",
		"requested; in place: the device's new events are dropped", `action="/privacy/suppressions/lift"`} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q:\n%.5000s", want, page)
		}
	}
	_, page = b.do("GET", "/privacy/erasures/0190a8c2-6f7e-7c3a-9b1d-000000000002", nil)
	if !strings.Contains(page, "Failed: rewrite archive 2026-10: the archive store refused") || !strings.Contains(page, "not requested") ||
		strings.Contains(page, `action="/privacy/suppressions/lift"`) {
		t.Errorf("failed erasure's report lacks its reason:\n%.3000s", page)
	}
}

// TestPrivacy_Lift lifts a suppression after a confirmation, with the
// person's token; lifting one that is gone says so.
func TestPrivacy_Lift(t *testing.T) {
	h, fp := newPrivacyHarness(t)
	fp.suppressions = []upstream.Suppression{{AppID: "shop", DeviceID: "dev 7", CreatedAt: time.Now(), CreatedBy: "ada"}}
	b := h.browser(t)
	csrf := b.signIn("ada")
	form := url.Values{"csrf": {csrf}, "app_id": {"shop"}, "device_id": {"dev 7"}}
	resp, page := b.do("POST", "/privacy/suppressions/lift", form)
	if resp.StatusCode != 200 || !strings.Contains(page, "Lift the suppression of device “dev 7” of app “shop”?") || fp.count("DELETE", "/v1/suppressions") != 0 {
		t.Fatalf("lift without confirm = %d (deletes %d), want the confirmation and nothing sent", resp.StatusCode, fp.count("DELETE", "/v1/suppressions"))
	}
	form.Set("confirm", "yes")
	resp, _ = b.do("POST", "/privacy/suppressions/lift", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/privacy?done=lifted" {
		t.Fatalf("confirmed lift = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	fp.mu.Lock()
	left, last := len(fp.suppressions), fp.calls[len(fp.calls)-1]
	fp.mu.Unlock()
	if left != 0 || last != "DELETE /v1/suppressions Bearer at-ada" {
		t.Errorf("after the lift %d suppressions, last call %q; want none, with the person's token", left, last)
	}
	resp, page = b.do("POST", "/privacy/suppressions/lift", form)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "That device is not suppressed") {
		t.Errorf("lifting again = %d:\n%.1500s", resp.StatusCode, page)
	}
}

// TestPrivacy_Refusals: no service configured, roles other than admin, and
// a lift that names no device.
func TestPrivacy_Refusals(t *testing.T) {
	h := newHarness(t)
	b := h.browser(t)
	csrf := b.signIn("ada")
	if resp, page := b.do("GET", "/privacy", nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "PRIVACY_SERVICE_URL") {
		t.Errorf("GET /privacy with no privacy service = %d, want 404 naming PRIVACY_SERVICE_URL", resp.StatusCode)
	}
	if _, page := b.do("GET", "/dashboards", nil); !strings.Contains(page, `href="/privacy"`) {
		t.Error("an admin's navigation has no Privacy link")
	}
	h2, fp := newPrivacyHarness(t)
	b = h2.browser(t)
	csrf = b.signIn("ada")
	if resp, _ := b.do("POST", "/privacy/suppressions/lift", url.Values{"csrf": {csrf}, "app_id": {"shop"}, "confirm": {"yes"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("lift without a device id = %d, want 400", resp.StatusCode)
	}
	for _, who := range []string{"ann", "aud"} {
		o := h2.browser(t)
		c := o.signIn(who)
		if resp, page := o.do("GET", "/privacy", nil); resp.StatusCode != http.StatusForbidden || strings.Contains(page, `href="/privacy"`) {
			t.Errorf("GET /privacy as %s = %d, want 403 and no Privacy link", who, resp.StatusCode)
		}
		if resp, _ := o.do("POST", "/privacy/erasures", url.Values{"csrf": {c}, "app_id": {"shop"}, "device_id": {"d"}, "confirm": {"yes"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /privacy/erasures as %s = %d, want 403", who, resp.StatusCode)
		}
	}
	if n := fp.count("POST", "/v1/erasures") + fp.count("DELETE", "/v1/suppressions"); n != 0 {
		t.Errorf("the privacy service was asked to change something %d times", n)
	}
}

// TestPrivacy_Outage: the service answering 503, stalled, or gone gives a
// readable page within the upstream timeout, never a hang or a trace, and
// says whether a request may have gone through.
func TestPrivacy_Outage(t *testing.T) {
	h, fp := newPrivacyHarness(t)
	b := h.browser(t)
	csrf := b.signIn("ada")
	request := url.Values{"csrf": {csrf}, "app_id": {"shop"}, "device_id": {"d"}, "confirm": {"yes"}}

	fp.mu.Lock()
	fp.unavailable = true
	fp.mu.Unlock()
	resp, page := b.do("POST", "/privacy/erasures", request)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(page, "the audit trail is unavailable; nothing was changed") {
		t.Errorf("service 503 = %d (Retry-After %q):\n%.1500s", resp.StatusCode, resp.Header.Get("Retry-After"), page)
	}

	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); stall.Close() })
	h.srv.deps.Privacy = upstream.Privacy{Client: upstream.New(stall.URL, nil, 300*time.Millisecond)}
	for _, c := range []struct {
		method, path string
		form         url.Values
		maybe        bool
	}{
		{"GET", "/privacy", nil, false},
		{"GET", "/privacy/erasures/0190a8c2-6f7e-7c3a-9b1d-2f4e5a6b7c8d", nil, false},
		{"POST", "/privacy/erasures", request, true},
	} {
		start := time.Now()
		resp, page := b.do(c.method, c.path, c.form)
		took := time.Since(start)
		if resp.StatusCode != http.StatusGatewayTimeout || took > 3*time.Second || !strings.Contains(page, "the privacy service did not answer in time") ||
			strings.Contains(page, "may have reached it") != c.maybe {
			t.Errorf("%s %s, service stalled = %d after %v:\n%.1500s", c.method, c.path, resp.StatusCode, took, page)
		}
	}

	// Slow rather than stalled: each call answers within the timeout, but
	// the page's calls together get one timeout, not one each.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		fp.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	fp.mu.Lock()
	fp.unavailable = false
	fp.mu.Unlock()
	h.srv.deps.Privacy = upstream.Privacy{Client: upstream.New(slow.URL, nil, 300*time.Millisecond)}
	start := time.Now()
	resp, page = b.do("GET", "/privacy", nil)
	if took := time.Since(start); resp.StatusCode != http.StatusGatewayTimeout || took > time.Second {
		t.Errorf("two calls of 200 ms against a 300 ms timeout = %d after %v, want 504 within the one timeout:\n%.1000s", resp.StatusCode, took, page)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	h.srv.deps.Privacy = upstream.Privacy{Client: upstream.New(gone.URL, nil, 300*time.Millisecond)}
	resp, page = b.do("GET", "/privacy", nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(page, "Listing the erasure requests: the privacy service did not answer") ||
		strings.Contains(page, gone.URL) || strings.Contains(page, "goroutine") {
		t.Errorf("service down = %d:\n%.1500s", resp.StatusCode, page)
	}
}

// TestPrivacy_UserErasureAndRetries: the list and the report name an
// erasure's subject (a device, or a user by pseudonym, shortened in the
// list), and show a retried erasure's attempts and when it is tried next.
// The service's JSON is written as services/retention/privacy sends it.
func TestPrivacy_UserErasureAndRetries(t *testing.T) {
	h := newHarness(t)
	const pseudo = "k1:0f3a9c5be71d42a8c6e0b9f1d2a3c4e5f60718293a4b5c6d7e8f90a1b2c3d4e5"
	const userErasure = `{"id":"0190a8c2-6f7e-7c3a-9b1d-000000000011","app_id":"shop","device_id":"",` +
		`"user_pseudonyms":["` + pseudo + `","k0:aa11bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff00112233"],` +
		`"suppress":false,"status":"running","requested_by":"ada","requested_at":"2026-12-02T10:00:00Z",` +
		`"started_at":"2026-12-02T10:00:05Z","attempts":2,"next_attempt_at":"2026-12-02T10:01:35Z",` +
		`"report":{"events_deleted":40},"error":"delete batch: the events database is unavailable"}`
	const deviceErasure = `{"id":"0190a8c2-6f7e-7c3a-9b1d-000000000012","app_id":"shop","device_id":"dev-3",` +
		`"suppress":true,"status":"queued","requested_by":"ada","requested_at":"2026-12-02T09:00:00Z","attempts":0,"report":{}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/erasures":
			_, _ = w.Write([]byte(`{"erasures":[` + userErasure + `,` + deviceErasure + `]}`))
		case "/v1/erasures/0190a8c2-6f7e-7c3a-9b1d-000000000011":
			_, _ = w.Write([]byte(userErasure))
		case "/v1/suppressions":
			_, _ = w.Write([]byte(`{"suppressions":[]}`))
		default:
			httpserver.WriteError(w, 404, "not_found", "no such resource", nil)
		}
	}))
	t.Cleanup(srv.Close)
	h.srv.deps.Privacy = upstream.Privacy{Client: upstream.New(srv.URL, nil, 5*time.Second)}
	b := h.browser(t)
	b.signIn("ada")

	_, list := b.do("GET", "/privacy", nil)
	for _, want := range []string{
		`<th scope="col">Subject</th>`, `<th scope="col">Attempts</th>`, `<th scope="col">Next attempt (UTC)</th>`,
		`user <code title="` + pseudo + `">k1:0f3a9c5b…</code>`, `device <code>dev-3</code>`,
		"<td>2</td><td>2026-12-02 10:01:35</td>", "<td>0</td><td>—</td>",
		"delete batch: the events database is unavailable",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%.5000s", want, list)
		}
	}
	if strings.Contains(list, "<code></code>") {
		t.Errorf("list shows an empty device id for the user erasure:\n%.5000s", list)
	}
	_, page := b.do("GET", "/privacy/erasures/0190a8c2-6f7e-7c3a-9b1d-000000000011", nil)
	for _, want := range []string{
		`<dt>Subject</dt><dd id="erasure-subject">user, by pseudonym: <code>` + pseudo + `</code>`,
		"<code>k0:aa11bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff00112233</code>",
		`<dt>Attempts</dt><dd id="erasure-attempts">2; the next at 2026-12-02 10:01:35 UTC`,
		"Attempt 2 failed: delete batch: the events database is unavailable; it is tried again at 2026-12-02 10:01:35 UTC.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q:\n%.5000s", want, page)
		}
	}
}

// TestPrivacy_EraseByUser requests an erasure by user id: the form offers
// the kind of subject, only the chosen id is sent (the user's without
// suppress), the service's field errors are shown as an alert with the form
// kept and nothing requested, and the raw user id reaches neither the list,
// the report nor the log: they name the user by the pseudonym the service
// answers with.
func TestPrivacy_EraseByUser(t *testing.T) {
	h, fp := newPrivacyHarness(t)
	logs := &testenv.SyncBuffer{}
	h.srv.log = slog.New(slog.NewJSONHandler(logs, nil))
	const raw = "raw-user-7@example.com"
	b := h.browser(t)
	csrf := b.signIn("ada")
	_, page := b.do("GET", "/privacy", nil)
	for _, want := range []string{
		`<legend>Erase by</legend>`, `id="subject-device" name="subject" type="radio" value="device" checked`,
		`id="subject-user" name="subject" type="radio" value="user">`, `<label for="user_id">User ID</label>`,
		`<span class="note" id="suppress-note">Devices only`,
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("GET /privacy lacks %q:\n%.3000s", want, page)
		}
	}
	// The device id typed before switching to a user stays in its field
	// without script; the user is what is erased, and suppress (on by
	// default) is the device's option.
	form := url.Values{"csrf": {csrf}, "app_id": {"shop"}, "subject": {"user"}, "user_id": {raw}, "device_id": {"dev-typed-first"}, "suppress": {"yes"}}
	confirmed := func(f url.Values) url.Values {
		c := url.Values{"confirm": {"yes"}}
		for k, v := range f {
			c[k] = v
		}
		return c
	}
	lastBody := func() map[string]any {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		return fp.bodies[len(fp.bodies)-1]
	}

	t.Run("ErrNoUserKey", func(t *testing.T) {
		resp, page := b.do("POST", "/privacy/erasures", confirmed(form))
		want := `<p class="error" role="alert">The privacy service refused: user_id cannot be erased: this service has no user id key (PRIVACY_USER_ID_KEYS). Nothing was changed.</p>`
		if resp.StatusCode != 422 || !strings.Contains(page, want) || !strings.Contains(page, `value="user" checked`) {
			t.Errorf("POST with no user key = %d, want 422 with %q and the user kept:\n%.3000s", resp.StatusCode, want, page)
		}
		body := lastBody()
		if _, dev := body["device_id"]; dev || body["user_id"] != raw || body["app_id"] != "shop" || body["suppress"] != false {
			t.Errorf("sent %v, want app_id, user_id and suppress false, no device_id", body)
		}
	})
	fp.mu.Lock()
	fp.userKeys = true
	fp.mu.Unlock()
	t.Run("ErrEmptyUser", func(t *testing.T) {
		before := fp.count("POST", "/v1/erasures")
		f := confirmed(form)
		f.Set("user_id", " ")
		resp, page := b.do("POST", "/privacy/erasures", f)
		if resp.StatusCode != 400 || !strings.Contains(page, `role="alert">Enter the user id. Nothing was requested.`) {
			t.Errorf("POST with a blank user id = %d:\n%.2000s", resp.StatusCode, page)
		}
		if n := fp.count("POST", "/v1/erasures") - before; n != 0 {
			t.Errorf("the privacy service was asked %d times", n)
		}
	})
	t.Run("ConfirmFirst", func(t *testing.T) {
		before := fp.count("POST", "/v1/erasures")
		resp, page := b.do("POST", "/privacy/erasures", form)
		for _, want := range []string{"Erase every event of user “" + raw + "” of app “shop”?", "cannot be undone",
			"suppression applies to devices only", `name="subject" value="user"`, `name="user_id" value="` + raw + `"`} {
			if resp.StatusCode != 200 || !strings.Contains(page, want) {
				t.Errorf("POST without confirm = %d, lacks %q:\n%.2000s", resp.StatusCode, want, page)
			}
		}
		if strings.Contains(page, `name="device_id"`) || strings.Contains(page, `name="suppress"`) {
			t.Errorf("the confirmation carries a device id or suppress:\n%.2000s", page)
		}
		if n := fp.count("POST", "/v1/erasures") - before; n != 0 {
			t.Errorf("the privacy service was asked %d times before the confirmation", n)
		}
	})
	t.Run("OK", func(t *testing.T) {
		// As the confirmation page posts it back.
		resp, _ := b.do("POST", "/privacy/erasures", url.Values{"csrf": {csrf}, "app_id": {"shop"}, "subject": {"user"}, "user_id": {raw}, "confirm": {"yes"}})
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/privacy/erasures/0190a8c2-") {
			t.Fatalf("confirmed POST = %d to %q, want 303 to the report", resp.StatusCode, loc)
		}
		body := lastBody()
		if len(body) != 3 || body["app_id"] != "shop" || body["user_id"] != raw || body["suppress"] != false {
			t.Errorf("sent %v, want exactly app_id, user_id and suppress false", body)
		}
		pseudo := fakePseudonym(raw)
		_, report := b.do("GET", loc, nil)
		_, list := b.do("GET", "/privacy", nil)
		for _, c := range []struct{ name, page, want string }{
			{"report", report, `<dd id="erasure-subject">user, by pseudonym: <code>` + pseudo + `</code>`},
			{"list", list, `user <code title="` + pseudo + `">` + pseudo[:11] + `…</code>`},
		} {
			if !strings.Contains(c.page, c.want) || strings.Contains(c.page, raw) {
				t.Errorf("%s lacks %q or shows the raw user id:\n%.5000s", c.name, c.want, c.page)
			}
		}
		if l := logs.String(); !strings.Contains(l, `"msg":"erasure requested"`) || !strings.Contains(l, `"subject":"user"`) || strings.Contains(l, raw) {
			t.Errorf("log lacks the request or holds the raw user id:\n%s", l)
		}
	})
	t.Run("ErrInProgress", func(t *testing.T) {
		resp, page := b.do("POST", "/privacy/erasures", confirmed(form))
		if resp.StatusCode != 409 || !strings.Contains(page, "An erasure of this user is already queued or running") {
			t.Errorf("second request = %d:\n%.2000s", resp.StatusCode, page)
		}
	})
}
