//go:build fault

package alerts

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// TestFault_AlertAcrossKill9 sends a spike of one app's hooking events
// through the collector, kills the alerts service with SIGKILL right after
// and again while the rule fires: the rule fires within 60 s of the spike,
// resolves once the window has passed, and the webhook receives exactly one
// delivery per transition.
func TestFault_AlertAcrossKill9(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "alert")
	hook := &webhook{secret: "e2e-secret-of-at-least-32-bytes!"}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	t.Cleanup(func() { testenv.Stack(t, "start", "alerts") })
	ruleID := create(t, env, "/v1/alert-rules", map[string]any{"name": "hooking spike " + app.ID, "app_id": app.ID,
		"threat": "hooking", "window_seconds": 60, "threshold": 30,
		"channel": map[string]any{"type": "webhook", "url": srv.URL, "secret": hook.secret}})

	var threats [][]any
	for i := 0; i < 40; i++ {
		threats = append(threats, []any{"hooking"})
	}
	for i := 0; i < 20; i++ {
		threats = append(threats, []any{"root"}) // another threat: not counted by the rule
	}
	spike := time.Now()
	send(t, env, app, threats)
	testenv.Stack(t, "kill9", "alerts")
	time.Sleep(time.Second)
	testenv.Stack(t, "start", "alerts")

	if err := e2etest.WaitFor(60*time.Second, func() (bool, error) { return len(hook.deliveries()) >= 1, nil }); err != nil {
		t.Fatalf("no firing delivery within 60 s of the spike")
	}
	fired := hook.deliveries()[0]
	t.Logf("firing delivered %.1f s after the spike", fired.At.Sub(spike).Seconds())
	testenv.Stack(t, "kill9", "alerts")
	time.Sleep(time.Second)
	testenv.Stack(t, "start", "alerts")

	if err := e2etest.WaitFor(150*time.Second, func() (bool, error) { return len(hook.deliveries()) >= 2, nil }); err != nil {
		t.Fatalf("no resolved delivery within 150 s of the spike: %+v", hook.deliveries())
	}
	time.Sleep(8 * time.Second) // a few evaluation periods: a duplicate would show by now
	got := hook.deliveries()
	if len(got) != 2 || got[0].State != "firing" || got[1].State != "resolved" {
		t.Fatalf("deliveries = %+v, want exactly firing then resolved", got)
	}
	for _, d := range got {
		if !d.SigValid || d.RuleID != ruleID || d.ID == "" {
			t.Errorf("delivery %+v: bad signature, rule or delivery id", d)
		}
	}
	if got[0].Value < 30 || got[0].ID == got[1].ID {
		t.Errorf("deliveries = %+v, want firing at 30 or more and distinct delivery ids", got)
	}
	r := e2etest.Do(t, http.MethodGet, alertsURL(t)+"/v1/alert-rules/"+ruleID+"/history", env.AdminKey, nil, nil)
	var hist struct {
		Transitions []struct{ State, Notification string }
	}
	if err := json.Unmarshal(r.Body, &hist); err != nil || len(hist.Transitions) != 2 || hist.Transitions[0].Notification != "sent" {
		t.Errorf("history = %d %s", r.Status, r.Body)
	}
}
