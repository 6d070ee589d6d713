// Package alerts tests the alerts service end to end: threat events sent
// through the collector reach a real rsyslogd (TLS) and an OCSF HTTP
// destination exactly once, and a spike of one app's hooking events fires
// a rule whose webhook receives one delivery per transition.
package alerts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"threatview/alerts/notify"
	"threatview/alerts/rsyslogtest"
	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// alertsURL is the running alerts service.
func alertsURL(t *testing.T) string { return testenv.MustEnv(t, "THREATVIEW_ALERTS_URL") }

// create POSTs body to the alerts API and returns the new id; the object
// is deleted when the test ends.
func create(t testing.TB, env e2etest.Env, path string, body any) string {
	t.Helper()
	b, _ := json.Marshal(body)
	r := e2etest.Do(t, http.MethodPost, testenv.MustEnv(t, "THREATVIEW_ALERTS_URL")+path, env.AdminKey, b, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST %s = %d %s", path, r.Status, r.Body)
	}
	var out struct{ ID string }
	if err := json.Unmarshal(r.Body, &out); err != nil || out.ID == "" {
		t.Fatalf("POST %s answer %s: %v", path, r.Body, err)
	}
	t.Cleanup(func() {
		if r, err := e2etest.TryDo(http.MethodDelete, testenv.MustEnv(t, "THREATVIEW_ALERTS_URL")+path+"/"+out.ID, env.AdminKey, nil, nil); err != nil || r.Status != http.StatusNoContent {
			t.Errorf("DELETE %s/%s: %v %d", path, out.ID, err, r.Status)
		}
	})
	return out.ID
}

// send posts events for app through the collector, threats[i] the threats
// of event i, and returns the ids of those with a threat and of the others.
func send(t testing.TB, env e2etest.Env, app e2etest.App, threats [][]any) (withThreat, without []string) {
	t.Helper()
	return sendFrom(t, env, app, "", "android", threats)
}

// sendFrom is send from client address ip (X-Forwarded-For, which the
// local collector believes from 127.0.0.1; blank: none) on a device
// running os.
func sendFrom(t testing.TB, env e2etest.Env, app e2etest.App, ip, os string, threats [][]any) (withThreat, without []string) {
	t.Helper()
	headers := map[string]string{"Content-Type": "application/json"}
	if ip != "" {
		headers["X-Forwarded-For"] = ip
	}
	for lo := 0; lo < len(threats); lo += 100 {
		hi := min(lo+100, len(threats))
		var events []map[string]any
		for i := lo; i < hi; i++ {
			events = append(events, map[string]any{
				"type": "app.startup", "event_id": e2etest.UUID(),
				"app":     map[string]string{"id": app.ID, "version": "2.0.0"},
				"device":  map[string]string{"id": "e2e-device", "model": "Pixel 8", "manufacturer": "Google", "os": os, "os_version": "15"},
				"threats": threats[i],
			})
		}
		b, _ := json.Marshal(map[string]any{"events": events})
		r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, b, headers)
		if r.Status != http.StatusAccepted {
			t.Fatalf("POST /v1/events = %d %s", r.Status, r.Body)
		}
		var out struct{ IDs []string }
		if err := json.Unmarshal(r.Body, &out); err != nil || len(out.IDs) != hi-lo {
			t.Fatalf("202 answer %s: %v", r.Body, err)
		}
		for i, id := range out.IDs {
			if len(threats[lo+i]) > 0 {
				withThreat = append(withThreat, id)
			} else {
				without = append(without, id)
			}
		}
	}
	return withThreat, without
}

// webhook is the receiving server: every delivery, its signature checked.
type webhook struct {
	mu     sync.Mutex
	secret string
	got    []delivery
}

type delivery struct {
	State    string `json:"state"`
	RuleID   string `json:"rule_id"`
	Value    int64  `json:"value"`
	Country  string `json:"country"`
	OS       string `json:"os"`
	ID       string `json:"-"`
	At       time.Time
	SigValid bool
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var d delivery
	_ = json.Unmarshal(b, &d)
	d.ID, d.At = r.Header.Get("X-ThreatView-Delivery"), time.Now()
	// As a receiver checks it (docs/siem.md): the time within 5 minutes,
	// the delivery id and the body signed together.
	d.SigValid = notify.Verify(h.secret, r.Header.Get("X-ThreatView-Signature"), d.ID, b, time.Now(), notify.VerifyWindow) == nil
	h.mu.Lock()
	h.got = append(h.got, d)
	h.mu.Unlock()
}

func (h *webhook) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.got...)
}

// ndjson is an HTTP destination keeping the OCSF lines it receives.
type ndjson struct {
	mu    sync.Mutex
	lines [][]byte
}

func (d *ndjson) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		d.lines = append(d.lines, l)
	}
}

func (d *ndjson) uids(t testing.TB) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	got := map[string]int{}
	for _, l := range d.lines {
		var f struct {
			ClassUID    int `json:"class_uid"`
			FindingInfo struct {
				UID string `json:"uid"`
			} `json:"finding_info"`
		}
		if err := json.Unmarshal(l, &f); err != nil || f.ClassUID != 2004 {
			t.Errorf("OCSF line %s: %v", l, err)
		}
		got[f.FindingInfo.UID]++
	}
	return got
}

// TestForwarding_ThroughCollector sends threat events and others for a
// fresh app through the collector; a syslog (TLS, CEF) forwarder to a real
// rsyslogd and an OCSF HTTP forwarder filtered to hooking must receive
// each of theirs exactly once and nothing else.
func TestForwarding_ThroughCollector(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "fwd")
	rs := rsyslogtest.Start(t, true)
	dst := &ndjson{}
	srv := httptest.NewServer(dst)
	defer srv.Close()
	syslogID := create(t, env, "/v1/forwarders", map[string]any{"name": "rsyslog " + app.ID, "type": "syslog",
		"url": "tls://" + rs.Addr, "format": "cef", "app_ids": []string{app.ID}, "ca_pem": rs.CAPEM})
	create(t, env, "/v1/forwarders", map[string]any{"name": "ocsf " + app.ID, "type": "http",
		"url": srv.URL, "format": "ocsf", "app_ids": []string{app.ID}, "threats": []string{"hooking"}})

	var threats [][]any
	for i := 0; i < 300; i++ {
		switch i % 3 {
		case 0:
			threats = append(threats, []any{})
		case 1:
			threats = append(threats, []any{"hooking"})
		default:
			threats = append(threats, []any{map[string]any{"type": "root", "detail": "su"}})
		}
	}
	with, without := send(t, env, app, threats)
	var hookIDs []string
	for i, id := range with {
		if i%2 == 0 { // with holds events 1, 2, 4, 5, ...: hooking first of each pair
			hookIDs = append(hookIDs, id)
		}
	}
	err := e2etest.WaitFor(90*time.Second, func() (bool, error) {
		ids, _ := rs.Received(t)
		return len(ids) >= len(with) && len(dst.uids(t)) >= len(hookIDs), nil
	})
	ids, lines := rs.Received(t)
	if err != nil {
		t.Fatalf("after 90 s rsyslog has %d of %d threat events, the OCSF destination %d of %d", len(ids), len(with), len(dst.uids(t)), len(hookIDs))
	}
	time.Sleep(2 * time.Second) // anything more would be a duplicate
	ids, lines = rs.Received(t)
	for _, id := range with {
		if ids[id] != 1 {
			t.Errorf("rsyslog received event %s %d times, want 1", id, ids[id])
		}
	}
	for _, id := range without {
		if ids[id] != 0 {
			t.Errorf("rsyslog received event %s without a threat", id)
		}
	}
	if len(ids) != len(with) {
		t.Errorf("rsyslog received %d distinct events, want %d", len(ids), len(with))
	}
	uids := dst.uids(t)
	for _, id := range hookIDs {
		if uids[id] != 1 {
			t.Errorf("OCSF destination received event %s %d times, want 1", id, uids[id])
		}
	}
	if len(uids) != len(hookIDs) {
		t.Errorf("OCSF destination received %d events, want the %d hooking ones", len(uids), len(hookIDs))
	}
	if len(lines) > 0 && !bytes.Contains([]byte(lines[0]), []byte("CEF:0|Threat View|")) {
		t.Errorf("rsyslog line %q is not CEF", lines[0])
	}
	r := e2etest.Do(t, http.MethodGet, alertsURL(t)+"/v1/forwarders/"+syslogID+"/status", env.AdminKey, nil, nil)
	var st struct {
		Delivered int64   `json:"delivered"`
		Pending   int64   `json:"pending"`
		Lag       float64 `json:"lag_seconds"`
	}
	if err := json.Unmarshal(r.Body, &st); err != nil || r.Status != http.StatusOK || st.Delivered != int64(len(with)) {
		t.Errorf("status = %d %s, want delivered %d", r.Status, r.Body, len(with))
	}
	t.Logf("forwarded %d threat events (%d hooking) exactly once; status %s", len(with), len(hookIDs), fmt.Sprint(st))
}

// TestAlerts_CountryScope sends a spike of one app's hooking events from a
// German address and a smaller one from a French address through the
// collector (which places the client by its address): the rule scoped to
// Germany fires within 60 s, the one scoped to France (same threshold) and
// the one scoped to Germany on iOS (the devices run Android) do not.
func TestAlerts_CountryScope(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "geo")
	hook := &webhook{secret: "geo-secret-of-at-least-32-bytes!"}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	rule := func(name, country, os string) string {
		return create(t, env, "/v1/alert-rules", map[string]any{"name": name + " " + app.ID, "app_id": app.ID,
			"threat": "hooking", "country": country, "os": os, "window_seconds": 120, "threshold": 20,
			"channel": map[string]any{"type": "webhook", "url": srv.URL, "secret": hook.secret}})
	}
	de, fr, deIOS := rule("germany", "DE", ""), rule("france", "fr", ""), rule("germany ios", "DE", "ios")
	hooking := func(n int) [][]any {
		var out [][]any
		for range n {
			out = append(out, []any{"hooking"})
		}
		return out
	}
	spike := time.Now()
	sendFrom(t, env, app, "31.0.1.10", "Android", hooking(25)) // DE (the test country database)
	sendFrom(t, env, app, "2.16.1.10", "android", hooking(12)) // FR
	if err := e2etest.WaitFor(60*time.Second, func() (bool, error) { return len(hook.deliveries()) >= 1, nil }); err != nil {
		t.Fatalf("no delivery within 60 s of the German spike")
	}
	t.Logf("firing delivered %.1f s after the spike", time.Since(spike).Seconds())
	time.Sleep(6 * time.Second) // three evaluation periods: a wrong firing would show by now
	got := hook.deliveries()
	if len(got) != 1 || got[0].RuleID != de || got[0].State != "firing" || got[0].Value != 25 || got[0].Country != "DE" ||
		!got[0].SigValid || got[0].ID == "" {
		t.Fatalf("deliveries = %+v, want one signed firing of the German rule (%s) at 25 with country DE", got, de)
	}
	for _, id := range []string{fr, deIOS} {
		r := e2etest.Do(t, http.MethodGet, alertsURL(t)+"/v1/alert-rules/"+id, env.AdminKey, nil, nil)
		var st struct{ State string }
		if err := json.Unmarshal(r.Body, &st); err != nil || st.State != "ok" {
			t.Errorf("rule %s = %d %s, want state ok", id, r.Status, r.Body)
		}
	}
}
