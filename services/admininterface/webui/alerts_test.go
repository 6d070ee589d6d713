package webui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestAlerts_Refusals checks the alerts pages' refusals that need no alerts
// service: none configured is a 404 with the setting named; a form without
// its CSRF token, a rule id that is not a UUID and a silence out of range
// are refused before anything is sent; an auditor may not read the pages.
func TestAlerts_Refusals(t *testing.T) {
	h := newHarness(t)
	b := h.browser(t)
	csrf := b.signIn("ada")
	if resp, page := b.do("GET", "/alerts", nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "ALERTS_SERVICE_URL") {
		t.Errorf("GET /alerts with no alerts service = %d, want 404 naming ALERTS_SERVICE_URL", resp.StatusCode)
	}
	for _, c := range []struct {
		path string
		form url.Values
		want int
	}{
		{"/alerts/rules", url.Values{"name": {"x"}}, http.StatusForbidden},
		{"/alerts/forwarders", url.Values{"name": {"x"}, "csrf": {csrf + "x"}}, http.StatusForbidden},
		{"/alerts/rules/not-a-uuid/delete", url.Values{"confirm": {"yes"}, "csrf": {csrf}}, http.StatusNotFound},
		{"/alerts/rules/0190a8c2-6f7e-7c3a-9b1d-2f4e5a6b7c8d/silence", url.Values{"hours": {"100000"}, "csrf": {csrf}}, http.StatusBadRequest},
	} {
		if resp, _ := b.do("POST", c.path, c.form); resp.StatusCode != c.want {
			t.Errorf("POST %s = %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
	aud := h.browser(t)
	aud.signIn("aud")
	if resp, _ := aud.do("GET", "/alerts/forwarders", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /alerts/forwarders as an auditor = %d, want 403", resp.StatusCode)
	}
}
