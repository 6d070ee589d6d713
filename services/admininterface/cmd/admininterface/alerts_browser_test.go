package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"threatview/admininterface/internal/browsertest"
	"threatview/platform/testenv"
)

// TestBrowser_Alerts walks the alerts pages in Chromium against the stack's
// alerts service: an admin creates a rule with the keyboard (a bad window
// is refused and creates nothing), silences it, reads its history and the
// undelivered notifications, creates and deletes a forwarder, and deletes
// the rule; an analyst reads the same pages without any form to change them.
func TestBrowser_Alerts(t *testing.T) {
	st := mustStack(t)
	testenv.MustEnv(t, "THREATVIEW_ALERTS_URL")
	base := startUI(t, st)
	w := browsertest.New(t, base)
	rule := testenv.Name("ui-rule")
	fwd := testenv.Name("ui-fwd")
	rowOf := func(table, attr, name string) string {
		return browsertest.Eval[string](w, `(() => { for (const r of document.querySelectorAll('#`+table+` tbody tr')) {
			if (r.textContent.includes('`+name+`')) return r.getAttribute('`+attr+`') || ''; } return ''; })()`)
	}

	w.SignIn(st.adminUser, st.adminPassword)
	w.Open("/alerts", "#rules")

	w.Refused = append(w.Refused, "/alerts/rules") // the 400 of the refused form
	// A window that is not a number: refused, the form keeps what was
	// typed, and no rule is created.
	w.Do("bad window", chromedp.SendKeys(chromedp.CSS("#name"), rule), chromedp.SetValue(chromedp.CSS("#window_seconds"), "five"),
		chromedp.SendKeys(chromedp.CSS("#channel_url"), "http://127.0.0.1:9/hook"+kb.Enter), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if !strings.Contains(w.Text("p.error"), "whole number of seconds") || w.Value("#name") != rule {
		t.Errorf("bad window: error %q, name kept %q", w.Text("p.error"), w.Value("#name"))
	}
	if id := rowOf("rules", "data-rule", rule); id != "" {
		t.Fatalf("a refused rule was created: %s", id)
	}

	// A country that is no ISO code: the alerts service refuses it, the
	// form keeps it, nothing is created.
	w.Do("bad country", chromedp.SetValue(chromedp.CSS("#window_seconds"), "300"), chromedp.SendKeys(chromedp.CSS("#country"), "XX"),
		chromedp.SetValue(chromedp.CSS("#os"), "android"), chromedp.Submit(chromedp.CSS("#name")), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if !strings.Contains(w.Text("p.error"), "ISO 3166-1") || w.Value("#country") != "XX" || w.Value("#os") != "android" {
		t.Errorf("bad country: error %q, country kept %q, os kept %q", w.Text("p.error"), w.Value("#country"), w.Value("#os"))
	}
	if id := rowOf("rules", "data-rule", rule); id != "" {
		t.Fatalf("a rule with a bad country was created: %s", id)
	}
	w.Shot("alerts-refused-country")

	// Created from the keyboard, scoped to Germany on Android: Enter in
	// the last field submits. Of an app of its own, so the shared stack's
	// traffic never fires it.
	w.Do("create a rule", chromedp.SendKeys(chromedp.CSS("#app_id"), testenv.Name("ui-alerts-app")), chromedp.SetValue(chromedp.CSS("#window_seconds"), "300"), chromedp.SetValue(chromedp.CSS("#threshold"), "5"),
		chromedp.Clear(chromedp.CSS("#country")), chromedp.SendKeys(chromedp.CSS("#country"), "de"),
		chromedp.SendKeys(chromedp.CSS("#channel_secret"), "a webhook secret of at least 32 bytes"),
		chromedp.Clear(chromedp.CSS("#channel_url")), chromedp.SendKeys(chromedp.CSS("#channel_url"), "http://127.0.0.1:9/hook"+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	id := rowOf("rules", "data-rule", rule)
	if id == "" || !strings.Contains(w.Text(".flash"), "Rule created") {
		t.Fatalf("after creating: flash %q, rule row %q", w.Text(".flash"), id)
	}
	row := `tr[data-rule="` + id + `"]`
	if got := w.Text(row); !strings.Contains(got, "at least 5 in 300 s") || !strings.Contains(got, "webhook") || !strings.Contains(got, "DE · android") {
		t.Errorf("rule row = %q", got)
	}
	w.Shot("alerts")

	// Silence it for 8 hours.
	w.Do("silence", chromedp.SetValue(chromedp.CSS("#hours-"+id), "8"),
		chromedp.Click(chromedp.CSS(`form[action="/alerts/rules/`+id+`/silence"] button`)))
	w.WaitLocation("done=silenced")
	w.Do("the silence saved", chromedp.WaitVisible(chromedp.CSS(row)))
	if cells := w.Text(row + " td:nth-child(8)"); !strings.HasPrefix(cells, "20") {
		t.Errorf("silenced until = %q, want a time", cells)
	}

	// Its history, then the notifications given up on.
	w.Do("open the history", chromedp.Click(chromedp.CSS(`a[href="/alerts/rules/`+id+`"]`)), chromedp.WaitVisible(chromedp.CSS("#history")))
	if !strings.Contains(w.Text("#rule-summary"), "silenced until") || !strings.Contains(w.Text("#rule-summary"), "country DE, OS android") || !strings.Contains(w.Text("#history"), "not fired yet") {
		t.Errorf("history page: %q / %q", w.Text("#rule-summary"), w.Text("#history"))
	}
	w.Shot("alert-history")
	w.Open("/alerts/dead", "#dead")
	w.Shot("alerts-dead")

	// A forwarder: created, listed with its status, deleted after a confirmation.
	w.Open("/alerts/forwarders", "#forwarders")
	w.Do("create a forwarder", chromedp.SendKeys(chromedp.CSS("#name"), fwd), chromedp.SendKeys(chromedp.CSS("#url"), "tcp://127.0.0.1:9"),
		chromedp.SetValue(chromedp.CSS("#format"), "ocsf"), chromedp.SendKeys(chromedp.CSS("#threats"), "root, hooking"+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	fid := rowOf("forwarders", "data-forwarder", fwd)
	if fid == "" {
		t.Fatalf("the new forwarder is not listed: %q", w.Text("#forwarders"))
	}
	frow := `tr[data-forwarder="` + fid + `"]`
	if got := w.Text(frow); !strings.Contains(got, "ocsf") || !strings.Contains(got, "root, hooking") || strings.Contains(got, "unknown") {
		t.Errorf("forwarder row = %q, want ocsf, its threats and a status", got)
	}
	w.Shot("forwarders")
	w.Do("delete the forwarder", chromedp.Click(chromedp.CSS(frow+" a.danger")), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(`button[name="confirm"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if rowOf("forwarders", "data-forwarder", fwd) != "" {
		t.Errorf("the deleted forwarder is still listed")
	}

	// Phone width.
	w.Do("phone width", chromedp.EmulateViewport(390, 844))
	w.Open("/alerts", "#rules")
	w.Shot("alerts-phone")
	w.Do("back to desktop", chromedp.EmulateViewport(1280, 800))
	w.SignOut()

	// An analyst reads the rules and forwarders but is offered no change.
	analyst := testenv.Name("alerts-analyst")
	createPerson(t, st, analyst, "analyst-password-1", "analyst")
	w.SignIn(analyst, "analyst-password-1")
	w.Open("/alerts", "#rules")
	if rowOf("rules", "data-rule", rule) != id {
		t.Errorf("the analyst does not see rule %s", id)
	}
	if n := browsertest.Eval[int](w, `document.querySelectorAll('main form, main a.danger').length`); n != 0 {
		t.Errorf("the analyst is offered %d forms or delete links on /alerts", n)
	}
	w.SignOut()

	// The admin deletes the rule after a confirmation.
	w.SignIn(st.adminUser, st.adminPassword)
	w.Open("/alerts", "#rules")
	w.Do("delete the rule", chromedp.Click(chromedp.CSS(row+" a.danger")), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(`button[name="confirm"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if rowOf("rules", "data-rule", rule) != "" {
		t.Errorf("the deleted rule is still listed")
	}
	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
