package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
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
	stored := storeEvents(t, st, pool, app, [][2]string{{erased}, {erased}, {erased}, {kept}})

	base := startUI(t, st)
	w := browsertest.New(t, base)
	w.Refused = append(w.Refused, "/privacy/erasures") // the 422 of the unknown app
	w.SignIn(st.adminUser, st.adminPassword)
	w.Open("/privacy", "#app_id")
	if !browsertest.Eval[bool](w, `document.querySelector('#suppress').checked`) {
		t.Error("suppress is not on by default")
	}
	// fill types the request with the keyboard: focus the app id, type,
	// Tab past the kind of subject (Device ID, chosen), to the device id,
	// type, Enter submits.
	fill := func(what, appID, dev string) {
		w.Do(what, chromedp.Focus(chromedp.CSS("#app_id")), chromedp.KeyEvent(appID+kb.Tab+kb.Tab+dev+kb.Enter),
			chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	}
	confirm := privacyConfirm(w)

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
	report := eraseAndReport(t, w, 3, "device", "requested; in place")
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

// privacyConfirm returns a step pressing "Erase for good" (or "Lift
// suppression") from the keyboard and waiting for waitFor.
func privacyConfirm(w *browsertest.Walker) func(what, waitFor string) {
	return func(what, waitFor string) {
		w.Do(what, chromedp.Focus(chromedp.CSS(`button[name="confirm"]`)), chromedp.KeyEvent(kb.Enter),
			chromedp.WaitVisible(chromedp.CSS(waitFor)))
	}
}

// eraseAndReport presses "Erase for good" on the confirmation page and
// follows the erasure's report until it is done; it checks the events
// removed, that the verification finds nothing of the subject ("device" or
// "user") left and the suppression line, and returns the report's path.
func eraseAndReport(t *testing.T, w *browsertest.Walker, events int, subject, suppression string) string {
	t.Helper()
	privacyConfirm(w)("confirm the erasure", "#erasure-status")
	w.WaitLocation("/privacy/erasures/")
	report := strings.TrimPrefix(strings.Split(w.Location(), "?")[0], w.Base)
	if !strings.Contains(w.Text(".flash"), "Erasure requested") {
		t.Errorf("after the request: flash %q", w.Text(".flash"))
	}
	w.Eventually(2*time.Minute, report, "#erasure-status", "the erasure done", func() bool {
		return w.Text("#erasure-status") == "done" || w.Text("#erasure-status") == "failed"
	})
	if got := w.Text("#erasure-status"); got != "done" {
		t.Fatalf("erasure %s: %s (%s)", report, got, w.Text("main"))
	}
	removed := fmt.Sprintf("events (every partition)\t%d", events)
	if got := w.Text("#removed"); !strings.Contains(got, removed) && !strings.Contains(got, strings.Replace(removed, "\t", " ", 1)) {
		t.Errorf("rows removed: %q, want %d events", got, events)
	}
	if got := w.Text("#verification"); !strings.Contains(got, "Verified: a final count finds nothing of this "+subject+" left") {
		t.Errorf("verification: %q", got)
	}
	if got := w.Text("#erasure-suppression"); !strings.Contains(got, suppression) {
		t.Errorf("suppression on the report: %q", got)
	}
	return report
}

// TestBrowser_PrivacyByUser erases a user by their raw user id, keyboard
// only, against the stack's privacy service (with the collector's user id
// keys): two users of a new app each send events from their own device;
// the admin picks "User ID" with the arrow keys (the device's fields and
// suppression go away), has an id longer than the service takes refused
// with the service's field error as an alert (nothing requested), then
// erases one user after a confirmation. The report and the list name the
// user by pseudonym; the raw id is in neither page, nor in the erasure's
// row, the audit trail or the stack's logs; the other user keeps their
// event. Screenshots at 1280×800 and 375 px.
func TestBrowser_PrivacyByUser(t *testing.T) {
	st := mustStack(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.MustEnv(t, "EVENTS_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	audit, err := sql.Open("mysql", testenv.MustEnv(t, "AUDIT_DATABASE_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	began := time.Now().UTC().Add(-time.Second)

	// Counted by device: each user has their own, and the collector
	// stores the user as a pseudonym only.
	app := testenv.Name("ui-privacy-user")
	erased, kept := testenv.Name("raw-user-erased")+"@example.com", testenv.Name("raw-user-kept")+"@example.com"
	devErased, devKept := testenv.Name("device-erased"), testenv.Name("device-kept")
	stored := storeEvents(t, st, pool, app, [][2]string{{devErased, erased}, {devErased, erased}, {devKept, kept}})

	base := startUI(t, st)
	w := browsertest.New(t, base)
	w.Refused = append(w.Refused, "/privacy/erasures") // the 422 of the id too long
	w.SignIn(st.adminUser, st.adminPassword)
	confirm := privacyConfirm(w)
	visible := func(sel string) bool {
		return browsertest.Eval[bool](w, `document.querySelector('`+sel+`').offsetParent !== null`)
	}
	// chooseUser types the app id, moves from Device ID to User ID with the
	// arrow key and tabs on, which lands in the user id: the device id and
	// the suppression are hidden, so skipped.
	chooseUser := func(what string) {
		w.Open("/privacy", "#app_id")
		w.Do(what, chromedp.Focus(chromedp.CSS("#app_id")), chromedp.KeyEvent(app+kb.Tab+kb.ArrowDown+kb.Tab))
		if got := browsertest.Eval[string](w, `document.activeElement.id`); got != "user_id" {
			t.Fatalf("%s: the focus is on %q, want user_id", what, got)
		}
		if !browsertest.Eval[bool](w, `document.querySelector('#subject-user').checked`) || visible("#device_id") || visible("#suppress") {
			t.Errorf("%s: User ID is not chosen, or the device id or suppression is still shown", what)
		}
	}

	// 100 euro signs are 300 bytes, more than the service takes: its field
	// error is shown as an alert, the form kept, nothing requested.
	chooseUser("choose a user for a long id")
	long := strings.Repeat("€", 100)
	w.Do("type a long user id", chromedp.KeyEvent(long+kb.Enter), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	confirm("confirm the long id", `p.error[role="alert"]`)
	if got := w.Text(`p.error[role="alert"]`); got != "The privacy service refused: user_id is longer than 256 bytes. Nothing was changed." {
		t.Errorf("long user id: alert %q", got)
	}
	if w.Value("#user_id") != long || !browsertest.Eval[bool](w, `document.querySelector('#subject-user').checked`) {
		t.Errorf("the refused form lost the user id or the kind of subject: %q", w.Value("#user_id"))
	}
	w.ShotBoth("privacy-user-refused")

	// The real request: a confirmation naming the user and saying that a
	// user is not suppressed, then the report.
	chooseUser("choose a user")
	w.Do("type the user id", chromedp.KeyEvent(erased))
	w.ShotBoth("privacy-user-form")
	w.Do("continue", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	if got := w.Text("main form"); !strings.Contains(got, "Erase every event of user “"+erased+"” of app “"+app+"”?") ||
		!strings.Contains(got, "suppression applies to devices only") {
		t.Errorf("confirmation: %q", got)
	}
	report := eraseAndReport(t, w, 2, "user", "not requested")
	id := report[strings.LastIndex(report, "/")+1:]
	if got := w.Text("#erasure-subject"); !strings.HasPrefix(got, "user, by pseudonym: k") {
		t.Errorf("subject on the report: %q", got)
	}
	html := func() string { return browsertest.Eval[string](w, `document.documentElement.outerHTML`) }
	if strings.Contains(html(), erased) {
		t.Errorf("the report shows the raw user id")
	}
	w.ShotBoth("privacy-user-report")
	if n, k := stored(devErased), stored(devKept); n != 0 || k != 1 {
		t.Errorf("after the erasure %d events of the erased user and %d of the other, want 0 and 1", n, k)
	}

	w.Open("/privacy", "#erasures")
	row := `tr[data-erasure="` + id + `"]`
	if got := w.Text(row); !strings.Contains(got, app) || !strings.Contains(got, "user k") || !strings.Contains(got, "done") {
		t.Errorf("erasure row = %q, want the app, the user by pseudonym, done", got)
	}
	if strings.Contains(html(), erased) {
		t.Errorf("the list shows the raw user id")
	}
	w.ShotBoth("privacy-user-list")
	waitAudited(t, st, "privacy.erasure.request", st.adminUser, began)

	// Nowhere raw: the erasure's row, the audit trail since the test
	// began (the request and every event's), the stack's logs.
	var row2 string
	if err := pool.QueryRow(ctx, `SELECT e::text FROM events.erasures e WHERE id = $1`, id).Scan(&row2); err != nil || strings.Contains(row2, erased) {
		t.Errorf("the erasure's row (%v) holds the raw user id: %s", err, row2)
	}
	audited := testenv.AuditRowsSince(t, audit, began)
	for _, s := range audited {
		if strings.Contains(s, erased) || strings.Contains(s, kept) {
			t.Errorf("an audit row holds a raw user id: %s", s)
		}
	}
	n := len(audited)
	if n == 0 {
		t.Error("no audit rows since the test began")
	}
	logs, _ := filepath.Glob(filepath.Join(testenv.Root(t), ".run", "log", "*.log"))
	for _, f := range logs {
		if b, err := os.ReadFile(f); err == nil && (bytes.Contains(b, []byte(erased)) || bytes.Contains(b, []byte(kept))) {
			t.Errorf("%s holds a raw user id", f)
		}
	}
	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// storeEvents posts events of app with a new token, one per {device id,
// raw user id} (a blank user id: none), waits up to 30 s until the stack
// has stored them all, and returns how many events of a device it stores.
func storeEvents(t *testing.T, st stackEnv, pool *pgxpool.Pool, app string, events [][2]string) func(dev string) int {
	t.Helper()
	secret := adminToken(t, st, app)
	want := map[string]int{}
	for _, ev := range events {
		if code := postUserEvent(t, st.collector, secret, app, ev[0], ev[1]); code != http.StatusAccepted {
			t.Fatalf("POST /v1/events for %s = %d", ev[0], code)
		}
		want[ev[0]]++
	}
	stored := func(dev string) int {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2`,
			app, dev).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for dev, n := range want {
		for ; stored(dev) < n; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of the %d events of %s stored within 30 s", stored(dev), n, dev)
			}
		}
	}
	return stored
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
	return postUserEvent(t, collector, token, appID, dev, "")
}

// postUserEvent sends one event of device dev and of the user with the raw
// id user (each none when blank), as an app would.
func postUserEvent(t *testing.T, collector, token, appID, dev, user string) int {
	t.Helper()
	device := map[string]string{"model": "Pixel 8", "manufacturer": "Google", "os": "android", "os_version": "14"}
	if dev != "" {
		device["id"] = dev
	}
	ev := map[string]any{"type": "app.startup", "app": map[string]string{"id": appID, "version": "1.0.0"},
		"device": device, "threats": []string{}}
	if user != "" {
		ev["user"] = map[string]string{"id": user}
	}
	body, _ := json.Marshal(ev)
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
