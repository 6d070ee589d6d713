package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/admininterface/internal/browsertest"
	"threatview/platform/testenv"
)

// TestBrowser_Privacy walks the privacy pages in Chromium against the
// stack's privacy service, with the keyboard only: an admin asks to erase
// an app with no data (refused, nothing requested), then one device of an
// app with two (a confirmation first), follows the report until the
// erasure is done and verified, finds it in the list with its counts and
// its suppression, and lifts the suppression after a confirmation. The
// privacy service records both under the person's name; the other device
// keeps its events. Screenshots at 1280×800 and phone width.
func TestBrowser_Privacy(t *testing.T) {
	st := mustStack(t)
	privacyURL := testenv.MustEnv(t, "THREATVIEW_PRIVACY_URL")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.MustEnv(t, "EVENTS_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// An app with two devices' events, stored by the stack.
	app := testenv.Name("ui-privacy")
	erased, kept := "device-erased-"+testenv.Name("d"), "device-kept-"+testenv.Name("d")
	secret := adminToken(t, st, app)
	for _, dev := range []string{erased, erased, erased, kept} {
		if code := postDeviceEvent(t, st.collector, secret, app, dev); code != http.StatusAccepted {
			t.Fatalf("POST /v1/events for %s = %d", dev, code)
		}
	}
	stored := func(dev string) int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2`, app, dev).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); stored(erased) < 3 || stored(kept) < 1; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("events not stored within 30 s: %d and %d", stored(erased), stored(kept))
		}
	}

	base := startUI(t, st)
	w := browsertest.New(t, base)
	w.Refused = append(w.Refused, "/privacy/erasures") // the 422 of the unknown app
	w.SignIn(st.adminUser, st.adminPassword)
	w.Open("/privacy", "#app_id")
	if !browsertest.Eval[bool](w, `document.querySelector('#suppress').checked`) {
		t.Error("suppress is not on by default")
	}
	// fill types the request with the keyboard: focus the app id, type,
	// Tab to the device id, type, Enter submits.
	fill := func(what, appID, dev string) {
		w.Do(what, chromedp.Focus(chromedp.CSS("#app_id")), chromedp.KeyEvent(appID+kb.Tab+dev+kb.Enter),
			chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	}
	confirm := func(what string, waitFor string) {
		w.Do(what, chromedp.Focus(chromedp.CSS(`button[name="confirm"]`)), chromedp.KeyEvent(kb.Enter),
			chromedp.WaitVisible(chromedp.CSS(waitFor)))
	}

	// An app with no data: refused by the service, shown as such, the form
	// kept, nothing requested.
	unknown := testenv.Name("ui-privacy-none")
	fill("request for an unknown app", unknown, "some-device")
	confirm("confirm the unknown app", "p.error")
	if got := w.Text("p.error"); !strings.Contains(got, "No data is stored for app “"+unknown+"”") {
		t.Errorf("unknown app: error %q", got)
	}
	if w.Value("#app_id") != unknown || w.Value("#device_id") != "some-device" {
		t.Errorf("the refused form lost what was typed: %q, %q", w.Value("#app_id"), w.Value("#device_id"))
	}
	w.Shot("privacy-refused")

	// The real request: a confirmation, then the report.
	w.Open("/privacy", "#app_id")
	fill("request an erasure", app, erased)
	if got := w.Text("main form"); !strings.Contains(got, "Erase every event of device “"+erased+"” of app “"+app+"”?") || !strings.Contains(got, "cannot be undone") {
		t.Errorf("confirmation: %q", got)
	}
	w.Shot("privacy-confirm")
	confirm("confirm the erasure", "#erasure-status")
	w.WaitLocation("/privacy/erasures/")
	report := strings.TrimPrefix(strings.Split(w.Location(), "?")[0], base)
	if !strings.Contains(w.Text(".flash"), "Erasure requested") {
		t.Errorf("after the request: flash %q", w.Text(".flash"))
	}
	w.Eventually(2*time.Minute, report, "#erasure-status", "the erasure done", func() bool {
		return w.Text("#erasure-status") == "done" || w.Text("#erasure-status") == "failed"
	})
	if got := w.Text("#erasure-status"); got != "done" {
		t.Fatalf("erasure %s: %s (%s)", report, got, w.Text("main"))
	}
	if got := w.Text("#removed"); !strings.Contains(got, "events (every partition)\t3") && !strings.Contains(got, "events (every partition) 3") {
		t.Errorf("rows removed: %q, want 3 events", got)
	}
	if got := w.Text("#verification"); !strings.Contains(got, "Verified: a final count finds nothing of this device left") {
		t.Errorf("verification: %q", got)
	}
	if got := w.Text("#erasure-suppression"); !strings.Contains(got, "requested; in place") {
		t.Errorf("suppression on the report: %q", got)
	}
	w.Shot("privacy-report")
	if n, k := stored(erased), stored(kept); n != 0 || k != 1 {
		t.Errorf("after the erasure %d events of the erased device and %d of the other, want 0 and 1", n, k)
	}

	// The list: the request with its counts, the suppression with its Lift.
	id := report[strings.LastIndex(report, "/")+1:]
	w.Open("/privacy", "#erasures")
	row := `tr[data-erasure="` + id + `"]`
	if got := w.Text(row); !strings.Contains(got, app) || !strings.Contains(got, "done") || !strings.Contains(got, st.adminUser) {
		t.Errorf("erasure row = %q", got)
	}
	supp := `#suppressions tr[data-device="` + erased + `"]`
	if got := w.Text(supp); !strings.Contains(got, app) {
		t.Errorf("suppression row = %q", got)
	}
	w.Shot("privacy")

	// Lift the suppression from the keyboard, after a confirmation.
	w.Do("lift", chromedp.Focus(chromedp.CSS(supp+" button")), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	if got := w.Text("main form"); !strings.Contains(got, "Lift the suppression of device “"+erased+"”") {
		t.Errorf("lift confirmation: %q", got)
	}
	confirm("confirm the lift", ".flash")
	w.WaitLocation("done=lifted")
	if n := browsertest.Eval[int](w, `document.querySelectorAll('#suppressions tr[data-device="`+erased+`"]').length`); n != 0 {
		t.Errorf("the lifted suppression is still listed")
	}
	w.Open(report, "#erasure-suppression")
	if got := w.Text("#erasure-suppression"); !strings.Contains(got, "not in place now (lifted)") {
		t.Errorf("suppression on the report after the lift: %q", got)
	}
	var sup struct {
		Suppressions []struct {
			AppID    string `json:"app_id"`
			DeviceID string `json:"device_id"`
		} `json:"suppressions"`
	}
	getJSON(t, privacyURL+"/v1/suppressions", st.adminKey, &sup)
	for _, s := range sup.Suppressions {
		if s.AppID == app {
			t.Errorf("the privacy service still suppresses %s/%s", s.AppID, s.DeviceID)
		}
	}
	// The person, not the admin interface, is the actor of both.
	for _, action := range []string{"privacy.erasure.request", "privacy.suppression.lift"} {
		waitAudited(t, st, action, st.adminUser, time.Now().Add(-10*time.Minute))
	}

	// Phone width: the list and the report fit.
	w.Do("phone width", chromedp.EmulateViewport(390, 844))
	for _, p := range []string{"/privacy", report} {
		w.Open(p, "main h1")
		if browsertest.Eval[bool](w, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
			t.Errorf("%s is wider than a phone screen", p)
		}
		if p == "/privacy" {
			w.Shot("privacy-phone")
		}
	}
	w.Do("back to desktop", chromedp.EmulateViewport(1280, 800))
	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// adminToken creates a token of app with the admin key and returns its secret.
func adminToken(t *testing.T, st stackEnv, app string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"app_id": app, "name": "privacy walk"})
	req, _ := http.NewRequest(http.MethodPost, st.tokens+"/v1/tokens", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+st.adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.Token == "" {
		t.Fatalf("create a token for %s: %d %v", app, resp.StatusCode, err)
	}
	return out.Token
}

// postDeviceEvent sends one event of device dev (none when blank), as an
// app would.
func postDeviceEvent(t *testing.T, collector, token, appID, dev string) int {
	t.Helper()
	device := map[string]string{"model": "Pixel 8", "manufacturer": "Google", "os": "android", "os_version": "14"}
	if dev != "" {
		device["id"] = dev
	}
	body, _ := json.Marshal(map[string]any{"type": "app.startup", "app": map[string]string{"id": appID, "version": "1.0.0"},
		"device": device, "threats": []string{}})
	req, _ := http.NewRequest(http.MethodPost, collector+"/v1/events", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/events: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func getJSON(t *testing.T, u, bearer string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// waitAudited waits up to 30 s for an audit record of action by actor
// since from (the audit worker stores records from the broker).
func waitAudited(t *testing.T, st stackEnv, action, actor string, from time.Time) {
	t.Helper()
	q := url.Values{"action": {action}, "actor": {actor}, "from": {from.UTC().Format(time.RFC3339)}, "limit": {"10"}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var out struct {
			Records []struct {
				Action     string `json:"action"`
				ActorToken string `json:"actor_token_id"`
			} `json:"records"`
		}
		getJSON(t, st.audit+"/v1/audit?"+q.Encode(), st.adminKey, &out)
		for _, r := range out.Records {
			if r.Action == action && r.ActorToken == actor {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no audit record of %s by %s within 30 s", action, actor)
			return
		}
	}
}
