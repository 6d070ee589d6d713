package httpapi_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"threatview/alerts/egress"
	"threatview/alerts/httpapi"
	"threatview/alerts/internal/egresstest"
	"threatview/platform/wire"
)

// recorder is an Auditor that keeps the records it is given.
type recorder struct {
	mu   sync.Mutex
	recs []wire.AuditRecord
}

func (r *recorder) Audit(_ context.Context, rec wire.AuditRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

func (r *recorder) bodies() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.recs {
		b.Write(rec.Body)
		b.WriteByte('\n')
	}
	return b.String()
}

func testDestinations(t *testing.T) httpapi.Destinations {
	p, err := egress.ParsePolicy("127.0.0.1/32,siem.internal:6514")
	if err != nil {
		t.Fatal(err)
	}
	return httpapi.Destinations{S3Buckets: []string{"siem-bucket"}, Guard: &egress.Guard{Policy: p, Resolver: egresstest.Resolver{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"siem.internal": {netip.MustParseAddr("10.20.0.5")},
		"hooks.test":    {netip.MustParseAddr("93.184.215.14")},
	}}}
}

// TestAPI_Redaction (issue 37 item 5): a Slack URL's path, URL query
// strings, channel secrets and a forwarder's secret header never reach a
// reader or the audit trail: they see scheme and host.
func TestAPI_Redaction(t *testing.T) {
	aud := &recorder{}
	a := newAPIWith(t, aud, testDestinations(t))
	const slackPath = "T0000/B0000/SLACKSECRETPART"
	code, body := a.do("POST", "/v1/alert-rules", a.admin, `{"name":"slack","window_seconds":300,"threshold":5,
		"channel":{"type":"slack","url":"https://hooks.test/services/`+slackPath+`?token=QUERYTOKEN"}}`)
	if code != 201 {
		t.Fatalf("POST slack rule = %d %s", code, body)
	}
	code, body = a.do("POST", "/v1/forwarders", a.admin, `{"name":"splunk","type":"http","format":"ocsf",
		"url":"https://hooks.test:8088/services/collector?token=FWDQUERYTOKEN",
		"secret_header":{"name":"authorization","value":"Splunk HEADERSECRET"}}`)
	if code != 201 {
		t.Fatalf("POST http forwarder = %d %s", code, body)
	}
	var fwd struct {
		ID           string
		URL          string
		SecretHeader map[string]string `json:"secret_header"`
	}
	_ = json.Unmarshal([]byte(body), &fwd)
	if fwd.URL != "https://hooks.test:8088" || fwd.SecretHeader["name"] != "Authorization" || fwd.SecretHeader["value"] != "" {
		t.Fatalf("POST http forwarder answered %s, want url https://hooks.test:8088 and the header's name only", body)
	}
	secrets := []string{"SLACKSECRETPART", "QUERYTOKEN", "HEADERSECRET", "/services/"}
	for _, path := range []string{"/v1/alert-rules", "/v1/forwarders"} {
		for _, who := range []string{a.analyst, a.admin} {
			code, body := a.do("GET", path, who, "")
			if code != 200 || !strings.Contains(body, `"https://hooks.test`) {
				t.Fatalf("GET %s = %d %s, want the scheme and host", path, code, body)
			}
			for _, s := range secrets {
				if strings.Contains(body, s) {
					t.Errorf("GET %s shows %q: %s", path, s, body)
				}
			}
		}
	}
	audited := aud.bodies()
	if !strings.Contains(audited, "hooks.test") {
		t.Fatalf("audit bodies %s do not name the destination's host", audited)
	}
	for _, s := range secrets {
		if strings.Contains(audited, s) {
			t.Errorf("an audit body holds %q: %s", s, audited)
		}
	}
}

// TestAPI_Destinations (issue 37 item 6): private, loopback, link-local and
// special-purpose destinations, literal or resolved, IPv4 or IPv6 or
// IPv4-mapped, are refused with 422 unless the operator's allow-list names
// them; s3 forwarders write only to configured buckets. Nothing is dialled.
func TestAPI_Destinations(t *testing.T) {
	a := newAPIWith(t, &recorder{}, testDestinations(t))
	hook := func(url string) string {
		return `{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"webhook","url":"` + url +
			`","secret":"0123456789abcdef0123456789abcdef"}}`
	}
	fwd := func(typ, url string) string {
		format := "ocsf"
		if typ == "syslog" {
			format = "cef"
		}
		return `{"name":"x","type":"` + typ + `","url":"` + url + `","format":"` + format + `"}`
	}
	for _, tc := range []struct {
		path, body string
		want       int
	}{
		{"/v1/alert-rules", hook("http://169.254.169.254/latest/meta-data/"), 422},
		{"/v1/alert-rules", hook("http://metadata.test/"), 422},
		{"/v1/alert-rules", hook("http://[::ffff:169.254.169.254]/"), 422},
		{"/v1/alert-rules", hook("http://[::1]:8089/"), 422},
		{"/v1/alert-rules", hook("http://[fe80::1]/"), 422},
		{"/v1/alert-rules", hook("http://10.0.0.1:8080/"), 422},
		{"/v1/alert-rules", hook("http://127.0.0.2:8080/"), 422},
		{"/v1/alert-rules", hook("http://0.0.0.0:8080/"), 422},
		{"/v1/alert-rules", `{"name":"x","window_seconds":300,"threshold":5,"channel":{"type":"slack","url":"http://192.168.1.1/"}}`, 422},
		{"/v1/forwarders", fwd("syslog", "tcp://172.16.0.1:514"), 422},
		{"/v1/forwarders", fwd("syslog", "tls://siem.internal:514"), 422},
		{"/v1/forwarders", fwd("http", "http://100.64.0.1/"), 422},
		{"/v1/forwarders", fwd("s3", "s3://audit-trail/checkpoints/"), 422},
		{"/v1/alert-rules", hook("http://127.0.0.1:9/hook"), 201},
		{"/v1/alert-rules", hook("https://hooks.test/x"), 201},
		{"/v1/forwarders", fwd("syslog", "tls://siem.internal:6514"), 201},
		{"/v1/forwarders", fwd("s3", "s3://siem-bucket/threatview/"), 201},
	} {
		code, body := a.do("POST", tc.path, a.admin, tc.body)
		if code != tc.want {
			t.Errorf("POST %s %s = %d %s, want %d", tc.path, tc.body, code, body, tc.want)
		}
	}
}
