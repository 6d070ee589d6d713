package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"threatview/admininterface/internal/browsertest"
	"threatview/platform/testenv"
)

// postAs sends one event as an app would, from client address ip (the
// stack's collector believes 127.0.0.1's X-Forwarded-For; 2.16.1.10 is FR
// in its test country database), and returns its id.
func postAs(t *testing.T, st stackEnv, token, app, device, session, ip string, threats ...string) string {
	t.Helper()
	ev := map[string]any{"type": "app.startup", "app": map[string]string{"id": app, "version": "3.1.0"},
		"device":  map[string]string{"id": device, "model": "Pixel 8", "manufacturer": "Google", "os": "android", "os_version": "14.1"},
		"threats": threats}
	if session != "" {
		ev["session"] = map[string]string{"id": session}
	}
	b, _ := json.Marshal(ev)
	req, _ := http.NewRequest(http.MethodPost, st.collector+"/v1/events", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ IDs []string }
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &out) != nil || len(out.IDs) != 1 {
		t.Fatalf("POST /v1/events = %d %s", resp.StatusCode, body)
	}
	return out.IDs[0]
}

// deletePerson removes a person the walk created through the UI.
func deletePerson(st stackEnv, username string) {
	req, _ := http.NewRequest(http.MethodDelete, st.identity+"/v1/users/"+username, nil)
	req.Header.Set("Authorization", "Bearer "+st.adminKey)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// TestBrowser_Analyst walks the analyst's pages and the people pages in
// Chromium against the real stack, keyboard only: an Insights Viewer signs
// in, sees the big numbers of what the test posted, sees a posted threat
// appear in Latest Events without reloading, filters All Events by device
// and session, opens the device timeline, a threat report and its country
// on the map; a User Administrator creates an analyst, locks and unlocks
// them, and cannot open a dashboard; an analyst cannot open Users; the
// stack's owner cannot demote themselves (nor anyone the last owner).
// Screenshots of every page at 1280 and 375 px go to docs/ui/ with
// THREATVIEW_UPDATE_SCREENSHOTS=1.
func TestBrowser_Analyst(t *testing.T) {
	st := mustStack(t)
	base := startUI(t, st)
	app := testenv.Name("analyst-app")
	token := adminToken(t, st, app)
	dev, other, sess := testenv.Name("dev"), testenv.Name("dev"), testenv.Name("sess")
	postAs(t, st, token, app, dev, sess, "2.16.1.10", "root")
	postAs(t, st, token, app, dev, sess, "2.16.1.10")
	postAs(t, st, token, app, other, "", "3.0.1.10")
	const pw = "analyst walk password"
	analyst := testenv.Name("ann")
	createPerson(t, st, analyst, pw, "analyst")

	w := browsertest.New(t, base)
	w.Refused = []string{"/users", "/dashboards"}
	signIn := func(user, password string) {
		w.Open("/login", "#username")
		w.Type("#username", user)
		w.Type("#password", password)
		w.Press(`form[action="/login"] button[type="submit"]`)
		w.Do("signed in or refused", chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Main"], main p.error`)))
		if msg := browsertest.Eval[string](w, `(document.querySelector("main p.error") || {textContent: ""}).textContent`); msg != "" {
			t.Fatalf("sign-in of %s refused: %s", user, msg)
		}
	}
	signIn(analyst, pw)

	// Home: today's numbers for the app, as picked with the keyboard.
	w.WaitLocation("/")
	w.Choose("#period", "today")
	w.Type("#app_id", app)
	w.Press(`#home-filters button[type="submit"]`)
	w.WaitLocation("app_id=" + app)
	home := w.Location()
	home = home[len(base):]
	w.Eventually(30*time.Second, home, "#n-events", "the posted events in the big numbers", func() bool {
		return w.Text("#n-events .now") == "3" && w.Text("#n-devices .now") == "2"
	})
	for sel, want := range map[string]string{"#n-threats .now": "1", "#n-apps .now": "1"} {
		if got := w.Text(sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	if !strings.Contains(w.Text("table.countries"), "France") {
		t.Errorf("the map's table lacks France: %q", w.Text("table.countries"))
	}
	if n := browsertest.Eval[int](w, `document.querySelectorAll('#home-map path').length`); n < 150 {
		t.Errorf("the world map has %d countries, want the whole world", n)
	}
	paint := browsertest.Eval[string](w, `JSON.stringify({paint: performance.getEntriesByType("paint").map(e => [e.name, Math.round(e.startTime)]),
		dcl: Math.round(performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd), load: Math.round(performance.getEntriesByType("navigation")[0].loadEventEnd)})`)
	t.Logf("the home page's timings in Chromium (ms after navigation): %s", paint)
	w.Press(`#home-map button[data-zoom="in"]`)
	if vb := browsertest.Eval[string](w, `document.querySelector('#home-map svg').getAttribute('viewBox')`); strings.HasPrefix(vb, "0 0 1000") {
		t.Errorf("zoom in left the viewBox at %q", vb)
	}
	w.Press(`#home-map button[data-zoom="reset"]`)
	w.ShotBoth("analyst-home")

	// Latest Events: a threat posted now appears without a reload.
	w.Do("live stream open", chromedp.Poll[chromedp.Void](`document.getElementById("live-state").textContent.startsWith("Live")`, chromedp.WithPollingTimeout(10*time.Second)))
	marker := browsertest.Eval[float64](w, `window.__tvMarker = Math.random()`)
	id := postAs(t, st, token, app, dev, sess, "2.16.1.10", "hook")
	posted := time.Now()
	w.Do("the new threat in Latest Events", chromedp.WaitVisible(chromedp.CSS(`#latest tr[data-event="`+id+`"]`)))
	t.Logf("Latest Events showed the new event %s after its 202", time.Since(posted).Round(10*time.Millisecond))
	if time.Since(posted) > 3*time.Second {
		t.Errorf("Latest Events showed the new event %s after its 202, want at most 3 s", time.Since(posted))
	}
	if browsertest.Eval[float64](w, `window.__tvMarker`) != marker {
		t.Error("the page reloaded to show the new event")
	}

	// All Events, filtered by device and session.
	w.Press("#view-more")
	w.WaitLocation("/events?")
	w.Type("#f-device_id", dev)
	w.Type("#f-session_id", sess)
	w.Press(`#event-filters button[type="submit"]`)
	w.WaitLocation("session_id=" + sess)
	w.Do("the filtered list", chromedp.WaitVisible(chromedp.CSS("#events tbody tr[data-event]")))
	if n := browsertest.Eval[int](w, `document.querySelectorAll('#events tbody tr[data-event]').length`); n != 3 {
		t.Errorf("All Events filtered by device and session lists %d events, want 3", n)
	}
	w.ShotBoth("analyst-events")

	// One event's fields, then its device's timeline.
	w.Press(`#events tbody tr[data-event] summary`)
	w.Do("the event's fields", chromedp.WaitVisible(chromedp.CSS(`#events details[open] pre`)))
	w.Press(`#events details[open] a[href^="/timelines/device/"]`)
	w.WaitLocation("/timelines/device/" + dev)
	w.Do("the timeline", chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if got := w.Text("#tl-events"); got != "3" {
		t.Errorf("the device timeline counts %q events, want 3", got)
	}
	w.ShotBoth("analyst-timeline")

	// A threat report from the home page, then its country on the map.
	w.Open(home, "#threat-reports")
	w.Press(`#threat-reports a[href^="/reports/threats/root?"]`)
	w.WaitLocation("/reports/threats/root")
	w.Do("the report", chromedp.WaitVisible(chromedp.CSS("#r-events")))
	if got := w.Text("#r-events .now"); got != "1" {
		t.Errorf("the root report counts %q events, want 1", got)
	}
	w.ShotBoth("analyst-report")
	w.Press(`#report-map a[data-country="FR"]`)
	w.WaitLocation("country=FR")
	w.Do("the country's events", chromedp.WaitVisible(chromedp.CSS("#events tbody tr[data-event]")))
	if !strings.Contains(w.Text("#events tbody"), "France") || strings.Contains(w.Text("#events tbody"), "United States") {
		t.Errorf("the report's FR link lists: %q", w.Text("#events tbody"))
	}

	// An analyst cannot open Users.
	w.Open("/users", "main h1")
	if got := w.Text("main h1"); got != "Forbidden" {
		t.Errorf("an analyst opens /users: %q, want Forbidden", got)
	}
	// My profile: set a display name.
	w.Open("/profile", "#profile-form")
	w.Type("#display_name", "Ann Alyst")
	w.Press(`#profile-form button[type="submit"]`)
	w.WaitLocation("done=")
	if w.Value("#display_name") != "Ann Alyst" {
		t.Errorf("the profile did not keep the display name: %q", w.Value("#display_name"))
	}
	w.ShotBoth("profile")
	w.SignOut()

	// A User Administrator creates an analyst, locks and unlocks them.
	uma := testenv.Name("uma")
	createPerson(t, st, uma, pw, "user_admin")
	signIn(uma, pw)
	w.WaitLocation("/users")
	w.Do("the users page", chromedp.WaitVisible(chromedp.CSS("#people")))
	newbie := testenv.Name("newbie")
	t.Cleanup(func() { deletePerson(st, newbie) })
	w.Type("#new-username", newbie)
	w.Type("#new-display", "New Analyst")
	w.Type("#new-password", "a first password 123")
	w.TabTo("#new-role-analyst")
	w.Do("tick Insights Viewer", chromedp.KeyEvent(" "))
	w.Press(`#create-person button[type="submit"]`)
	w.WaitLocation("/users/" + newbie)
	w.Do("the person", chromedp.WaitVisible(chromedp.CSS("#person-status")))
	if got := w.Text("#person"); !strings.Contains(got, "Insights Viewer") || !strings.Contains(got, "New Analyst") {
		t.Errorf("the new person: %q", got)
	}
	w.Press(`#lock-form button`)
	w.WaitLocation("is+locked")
	if got := w.Text("#person-status"); got != "Locked" {
		t.Errorf("after Lock, status %q", got)
	}
	w.ShotBoth("person")
	w.Press(`#lock-form button`)
	w.WaitLocation("active+again")
	if got := w.Text("#person-status"); got != "Active" {
		t.Errorf("after Unlock, status %q", got)
	}
	w.Open("/users?q="+newbie, "#people")
	w.ShotBoth("users")
	w.Open("/dashboards", "main h1")
	if got := w.Text("main h1"); got != "Forbidden" {
		t.Errorf("a User Administrator opens /dashboards: %q, want Forbidden", got)
	}
	w.SignOut()

	// The stack's owner cannot remove their own Account Owner role (with
	// no other owner, the last one).
	signIn(st.adminUser, st.adminPassword)
	w.Open("/users/"+st.adminUser, "#roles-form")
	w.TabTo("#role-admin")
	w.Do("untick Account Owner", chromedp.KeyEvent(" "))
	w.Press(`#roles-form button[type="submit"]`)
	w.Do("the refusal", chromedp.WaitVisible(chromedp.CSS("main p.error")))
	if got := w.Text("main p.error"); !strings.Contains(got, "Account Owner") {
		t.Errorf("demoting the owner: %q, want a refusal naming the Account Owner role", got)
	}
	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
