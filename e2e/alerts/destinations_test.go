package alerts

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// TestAlerts_Destinations (issue 37 items 5, 6 and 8) against the running
// service: the metadata address, private ranges, loopback outside the local
// stack's allow-list (127.0.0.1/32) and a short webhook secret are refused
// with 422 before anything is stored; a Slack URL's secret path and a
// forwarder's query token and secret header are not shown to an analyst.
// Nothing here dials a non-loopback address.
func TestAlerts_Destinations(t *testing.T) {
	env := e2etest.MustEnv(t)
	base := testenv.MustEnv(t, "THREATVIEW_ALERTS_URL")
	const secret = `"secret":"e2e-secret-of-at-least-32-bytes!"`
	for _, body := range []string{
		`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"webhook","url":"http://169.254.169.254/latest/meta-data/",` + secret + `}}`,
		`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"webhook","url":"http://[::ffff:169.254.169.254]/",` + secret + `}}`,
		`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"webhook","url":"http://127.0.0.2:8089/",` + secret + `}}`,
		`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"slack","url":"http://10.0.0.1/services/x"}}`,
		`{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"webhook","url":"http://127.0.0.1:9/","secret":"short"}}`,
	} {
		if r := e2etest.Do(t, http.MethodPost, base+"/v1/alert-rules", env.AdminKey, []byte(body), nil); r.Status != http.StatusUnprocessableEntity {
			t.Errorf("POST rule %s = %d %s, want 422", body, r.Status, r.Body)
			if r.Status == http.StatusCreated {
				deleteCreated(t, env, "/v1/alert-rules", r.Body)
			}
		}
	}
	for _, body := range []string{
		`{"name":"x","type":"syslog","url":"tcp://192.168.1.10:514","format":"cef"}`,
		`{"name":"x","type":"http","url":"http://[fe80::1]:8088/","format":"ocsf"}`,
		`{"name":"x","type":"s3","url":"s3://not-configured/x","format":"ocsf"}`,
	} {
		if r := e2etest.Do(t, http.MethodPost, base+"/v1/forwarders", env.AdminKey, []byte(body), nil); r.Status != http.StatusUnprocessableEntity {
			t.Errorf("POST forwarder %s = %d %s, want 422", body, r.Status, r.Body)
			if r.Status == http.StatusCreated {
				deleteCreated(t, env, "/v1/forwarders", r.Body)
			}
		}
	}
	create(t, env, "/v1/alert-rules", map[string]any{"name": testenv.Name("slack"), "app_id": testenv.Name("dest-app"),
		"window_seconds": 300, "threshold": 5, "channel": map[string]any{"type": "slack", "url": "http://127.0.0.1:9/services/T0/B0/SLACKSECRETPART"}})
	create(t, env, "/v1/forwarders", map[string]any{"name": testenv.Name("splunk"), "type": "http", "format": "ocsf",
		"app_ids": []string{testenv.Name("dest-app")}, "url": "http://127.0.0.1:9/collector?token=QUERYTOKEN",
		"secret_header": map[string]string{"name": "Authorization", "value": "Splunk HEADERSECRET"}})
	for _, path := range []string{"/v1/alert-rules", "/v1/forwarders"} {
		r := e2etest.Do(t, http.MethodGet, base+path, env.AdminKey, nil, nil)
		for _, s := range []string{"SLACKSECRETPART", "QUERYTOKEN", "HEADERSECRET"} {
			if strings.Contains(string(r.Body), s) {
				t.Errorf("GET %s shows %q", path, s)
			}
		}
	}
}

// deleteCreated deletes what a POST that should have been refused made.
func deleteCreated(t *testing.T, env e2etest.Env, path string, answer []byte) {
	var out struct{ ID string }
	if json.Unmarshal(answer, &out) == nil && out.ID != "" {
		_, _ = e2etest.TryDo(http.MethodDelete, testenv.MustEnv(t, "THREATVIEW_ALERTS_URL")+path+"/"+out.ID, env.AdminKey, nil, nil)
	}
}
