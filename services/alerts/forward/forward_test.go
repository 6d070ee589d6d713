package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"threatview/alerts"
	"threatview/alerts/forward"
	"threatview/alerts/rsyslogtest"
)

func event(i int, threats ...string) alerts.Event {
	at := time.Date(2026, 12, 2, 10, 0, i%60, 123456000, time.UTC)
	return alerts.Event{
		ID: fmt.Sprintf("0193a1b2-c3d4-7e5f-8a9b-%012d", i), AppID: "demo-app", ReceivedAt: at, OccurredAt: at.Add(-time.Second),
		Type: "app.startup", AppVersion: "1.2.3", DeviceModel: "Pixel 8", OS: "Android", OSVersion: "15", Country: "DE",
		Threats: threats,
	}
}

func TestAppendCEF(t *testing.T) {
	e := event(1, "hooking", "root")
	e.DeviceModel = "evil|model=x\nnext"
	got := string(forward.AppendCEF(nil, &e, "v1"))
	for _, want := range []string{
		"CEF:0|Threat View|Threat View|v1|threat:hooking|Threat detected: hooking, root|7|",
		"externalId=" + e.ID, "cs1Label=appId cs1=demo-app", "cs2=hooking,root", `cs4=evil|model\=x\nnext`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("AppendCEF = %q, want it to contain %q", got, want)
		}
	}
	if strings.ContainsAny(got, "\r\n") {
		t.Errorf("AppendCEF = %q holds a line break", got)
	}
}

func TestAppendSyslog(t *testing.T) {
	e := event(2, "debugger")
	e.AppID = `a"b]c\`
	got := string(forward.AppendSyslog(nil, &e, "host1", []byte("MSG")))
	want := `<164>1 2026-12-02T10:00:02.123456Z host1 threatview - threat [threatview@32473 event_id="` + e.ID + `" app_id="a\"b\]c\\"] MSG`
	if got != want {
		t.Fatalf("AppendSyslog =\n%s\nwant\n%s", got, want)
	}
}

// mustSchema compiles the OCSF 1.2.0 Detection Finding schema of testdata.
func mustSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/ocsf-1.2.0-detection-finding.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("ocsf.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("ocsf.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validateLines checks every NDJSON line against the schema and returns
// the finding uids.
func validateLines(t *testing.T, s *jsonschema.Schema, body []byte) []string {
	t.Helper()
	var uids []string
	for _, line := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if err := s.Validate(v); err != nil {
			t.Fatalf("line %s does not validate: %v", line, err)
		}
		var f forward.OCSF
		_ = json.Unmarshal(line, &f)
		uids = append(uids, f.FindingInfo.UID)
	}
	return uids
}

func TestAppendOCSF_Schema(t *testing.T) {
	s := mustSchema(t)
	e := event(3, "emulator")
	e.OS, e.Country = "", ""
	body := forward.AppendOCSF(forward.AppendOCSF(nil, &e, "dev"), ptr(event(4, "hooking")), "dev")
	if uids := validateLines(t, s, body); len(uids) != 2 || uids[0] != e.ID {
		t.Fatalf("uids = %v", uids)
	}
	// The schema does check: a line without finding_info fails.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"category_uid":2,"class_uid":2004,"activity_id":1,"type_uid":200401,"severity_id":4,"time":1,"metadata":{"version":"1.2.0","product":{"vendor_name":"x"}}}`))
	if err := s.Validate(bad); err == nil {
		t.Fatal("a finding without finding_info validated")
	}
}

func ptr[T any](v T) *T { return &v }

// TestSyslog_RsyslogTLS sends batches to a real rsyslogd over TLS (RFC
// 5425, octet counting) and checks it wrote every event exactly once, CEF
// intact.
func TestSyslog_RsyslogTLS(t *testing.T) {
	srv := rsyslogtest.Start(t, true)
	f := alerts.Forwarder{ID: "f1", Type: alerts.ForwardSyslog, URL: "tls://" + srv.Addr, Format: alerts.FormatCEF, CAPEM: srv.CAPEM}
	sink, err := forward.NewSink(&f, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 300
	for i := 0; i < n; i += 100 {
		var batch []alerts.Event
		for j := i; j < i+100; j++ {
			batch = append(batch, event(j, "hooking"))
		}
		if err := sink.Send(ctx, batch); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	waitReceived(t, srv, n)
	ids, lines := srv.Received(t)
	for i := 0; i < n; i++ {
		if id := event(i).ID; ids[id] != 1 {
			t.Fatalf("event %s received %d times, want 1", id, ids[id])
		}
	}
	if !strings.Contains(lines[0], "CEF:0|Threat View|") || !strings.Contains(lines[0], "[threatview@32473 event_id=") {
		t.Fatalf("first line %q is not our RFC 5424 CEF message", lines[0])
	}

	// A forwarder that does not trust the server's CA sends nothing.
	f.CAPEM = ""
	untrusting, _ := forward.NewSink(&f, testConfig(t))
	defer untrusting.Close()
	if err := untrusting.Send(ctx, []alerts.Event{event(999, "root")}); err == nil {
		t.Fatal("Send to a server of an unknown CA succeeded")
	}
}

func waitReceived(t *testing.T, srv *rsyslogtest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ids, _ := srv.Received(t)
		if len(ids) >= n || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ndjsonServer is an HTTP destination that records the lines it took and
// refuses the first refuse requests with 503.
type ndjsonServer struct {
	mu     sync.Mutex
	bodies [][]byte
	refuse int
}

func (s *ndjsonServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse > 0 {
		s.refuse--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("Content-Type") != "application/x-ndjson" {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	s.bodies = append(s.bodies, b)
}

func (s *ndjsonServer) all() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.bodies, nil)
}

func TestHTTP_OCSF(t *testing.T) {
	dst := &ndjsonServer{refuse: 1}
	srv := httptest.NewTLSServer(dst)
	defer srv.Close()
	caPEM := string(pemOf(srv.Certificate().Raw))
	f := alerts.Forwarder{ID: "f2", Type: alerts.ForwardHTTP, URL: srv.URL, Format: alerts.FormatOCSF, CAPEM: caPEM}
	sink, err := forward.NewSink(&f, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	batch := []alerts.Event{event(1, "hooking"), event(2, "root", "debugger")}
	if err := sink.Send(context.Background(), batch); err == nil {
		t.Fatal("Send to a destination answering 503 succeeded")
	}
	if err := sink.Send(context.Background(), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	uids := validateLines(t, mustSchema(t), dst.all())
	if len(uids) != 2 || uids[0] != batch[0].ID || uids[1] != batch[1].ID {
		t.Fatalf("uids = %v", uids)
	}
}
