package contract

import (
	"encoding/json"
	"net/http"
	"testing"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// TestConformance_Alerts validates the alerts service's real answers
// against api/alerts.openapi.json: rules, their history and the dead
// letters, forwarders and their status, and bad input.
func TestConformance_Alerts(t *testing.T) {
	env := e2etest.MustEnv(t)
	c := newCaller(t, "alerts", testenv.MustEnv(t, "THREATVIEW_ALERTS_URL"))
	c.ops()
	st, b := c.call(true, http.MethodPost, "/v1/alert-rules", env.AdminKey, []byte(`{"name":"contract","app_id":"contract-app",
		"threat":"hooking","window_seconds":300,"threshold":50,"channel":{"type":"webhook","url":"http://127.0.0.1:9/hook","secret":"contract-secret-of-at-least-32-bytes"}}`), nil)
	c.want("POST /v1/alert-rules", st, 201, b)
	var rule struct{ ID string }
	_ = json.Unmarshal(b, &rule)
	st, b = c.call(true, http.MethodPost, "/v1/alert-rules", env.AdminKey, []byte(`{"name":"contract scoped","app_id":"contract-app",
		"country":"DE","os":"android","window_seconds":300,"threshold":50,"channel":{"type":"email","to":"secteam@threatview.test"}}`), nil)
	c.want("POST /v1/alert-rules (country, os)", st, 201, b)
	var scoped struct{ ID, Country, OS string }
	if _ = json.Unmarshal(b, &scoped); scoped.Country != "DE" || scoped.OS != "android" {
		t.Errorf("scoped rule = %s, want country DE and os android", b)
	}
	st, b = c.call(true, http.MethodPost, "/v1/forwarders", env.AdminKey, []byte(`{"name":"contract","type":"syslog",
		"url":"tcp://127.0.0.1:9","format":"cef","app_ids":["contract-app"]}`), nil)
	c.want("POST /v1/forwarders", st, 201, b)
	var fwd struct{ ID string }
	_ = json.Unmarshal(b, &fwd)
	for _, tc := range []struct {
		valid        bool
		method, path string
		key          string
		body         string
		status       int
	}{
		{true, "GET", "/v1/alert-rules", env.AdminKey, "", 200},
		{true, "GET", "/v1/alert-rules/" + rule.ID, env.AdminKey, "", 200},
		{true, "GET", "/v1/alert-rules/" + rule.ID + "/history?limit=5", env.AdminKey, "", 200},
		{true, "PUT", "/v1/alert-rules/" + rule.ID + "/silence", env.AdminKey, `{"until":null}`, 200},
		{true, "GET", "/v1/alert-notifications?status=dead", env.AdminKey, "", 200},
		{true, "GET", "/v1/forwarders", env.AdminKey, "", 200},
		{true, "GET", "/v1/forwarders/" + fwd.ID + "/status", env.AdminKey, "", 200},
		{false, "GET", "/v1/alert-notifications?status=lost", env.AdminKey, "", 400},
		{false, "GET", "/v1/alert-rules/" + rule.ID + "/history?limit=0", env.AdminKey, "", 400},
		{false, "POST", "/v1/alert-rules", env.AdminKey, `{"name":"x","window_seconds":5,"threshold":1,"channel":{"type":"webhook","url":"http://a"}}`, 422},
		{false, "POST", "/v1/forwarders", env.AdminKey, `{"name":"x","type":"ftp","url":"ftp://a","format":"cef"}`, 422},
		{false, "POST", "/v1/alert-rules", env.AdminKey, `{"name":"x","country":"XX","window_seconds":60,"threshold":1,"channel":{"type":"webhook","url":"http://a"}}`, 422},
		{false, "POST", "/v1/alert-rules", env.AdminKey, `{"name":"x","country":"DEU","window_seconds":60,"threshold":1,"channel":{"type":"webhook","url":"http://a"}}`, 422},
		{false, "POST", "/v1/alert-rules", env.AdminKey, `{"name":"x","os":"symbian","window_seconds":60,"threshold":1,"channel":{"type":"webhook","url":"http://a"}}`, 422},
		{false, "GET", "/v1/alert-rules", "", "", 401},
		{true, "GET", "/v1/alert-rules/01a2371e-0000-7000-8000-000000000000", env.AdminKey, "", 404},
		{true, "DELETE", "/v1/forwarders/" + fwd.ID, env.AdminKey, "", 204},
		{true, "GET", "/v1/alert-rules/" + scoped.ID, env.AdminKey, "", 200},
		{true, "DELETE", "/v1/alert-rules/" + scoped.ID, env.AdminKey, "", 204},
		{true, "DELETE", "/v1/alert-rules/" + rule.ID, env.AdminKey, "", 204},
		{true, "DELETE", "/v1/alert-rules/" + rule.ID, env.AdminKey, "", 404},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		st, b := c.call(tc.valid, tc.method, tc.path, tc.key, body, nil)
		c.want(tc.method+" "+tc.path, st, tc.status, b)
	}
	t.Log(c.spec.report())
}
