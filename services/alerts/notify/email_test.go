package notify_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/alerts/internal/smtptest"
	"threatview/alerts/notify"
)

// newSender returns a Sender that may reach the tests' loopback receivers.
func newSender(t *testing.T, timeout time.Duration, relay ...notify.SMTP) *notify.Sender {
	t.Helper()
	p, err := egress.ParsePolicy("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	var r notify.SMTP
	if len(relay) > 0 {
		r = relay[0]
	}
	return notify.New(timeout, r, egress.NewGuard(p))
}

func TestSender_Email(t *testing.T) {
	box, addr := smtptest.Start(t)
	s := newSender(t, 5*time.Second, notify.SMTP{Addr: addr, From: "alerts@threatview.test", TLS: notify.TLSNone})
	n := alerts.Notification{RuleID: "r1", Name: "hooking spike", State: "firing", Value: 63, Threshold: 50,
		WindowSeconds: 300, AppID: "demo-app", Threat: "hooking", Country: "DE", OS: "android",
		At: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	body, _ := json.Marshal(n)
	const id = "0193a1b2-0007-7e5f-8a9b-000000000007"
	for range 2 { // a resend is the same message
		if err := s.Send(context.Background(), alerts.Channel{Type: alerts.ChannelEmail, To: "secteam@threatview.test"}, id, body); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	msgs := box.Messages()
	if len(msgs) != 2 {
		t.Fatalf("the SMTP server received %d messages, want 2", len(msgs))
	}
	m := msgs[0]
	if m.From != "alerts@threatview.test" || len(m.To) != 1 || m.To[0] != "secteam@threatview.test" {
		t.Fatalf("envelope %s -> %v", m.From, m.To)
	}
	if msgs[1].Data != m.Data {
		t.Errorf("a resend differs from the first copy:\n%s\n---\n%s", m.Data, msgs[1].Data)
	}
	if m.Header("Message-ID") != "<"+id+"@threatview>" || m.Header(notify.DeliveryHeader) != id {
		t.Errorf("Message-ID %q, %s %q; want the delivery id in both", m.Header("Message-ID"), notify.DeliveryHeader, m.Header(notify.DeliveryHeader))
	}
	if !strings.Contains(notify.Text(n), "in app demo-app (DE android)") {
		t.Errorf("text %q does not name the scope", notify.Text(n))
	}
	for _, want := range []string{"Subject: " + notify.Text(n), `"state": "firing"`, `"country": "DE"`} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Data)
		}
	}

	// No relay configured: an error (retried, then dead-lettered), not a panic.
	none := newSender(t, time.Second)
	if err := none.Send(context.Background(), alerts.Channel{Type: alerts.ChannelEmail, To: "a@b.test"}, id, body); err == nil {
		t.Fatal("Send without ALERTS_SMTP_ADDR succeeded")
	}
}

func TestSender_Slack(t *testing.T) {
	var got map[string]string
	var sig string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sig = r.Header.Get(notify.SignatureHeader)
		_ = json.NewDecoder(r.Body).Decode(&got)
	}))
	defer srv.Close()
	body := []byte(`{"rule_id":"r1","name":"spike","state":"resolved","value":3,"threshold":50,"window_seconds":300,"app_id":"","threat":"","at":"2026-12-02T10:00:00Z"}`)
	if err := newSender(t, time.Second).Send(context.Background(), alerts.Channel{Type: alerts.ChannelSlack, URL: srv.URL}, "d2", body); err != nil {
		t.Fatal(err)
	}
	want := "[Threat View] resolved spike: 3 sightings of any threat in all apps over 300s (threshold 50)"
	if len(got) != 1 || got["text"] != want || sig != "" {
		t.Fatalf("Slack body = %v (signature %q), want only text %q", got, sig, want)
	}
}

func TestSender_WebhookAndSlack(t *testing.T) {
	// A refused connection's error names no URL (a Slack URL is a secret).
	s := newSender(t, time.Second)
	err := s.Send(context.Background(), alerts.Channel{Type: alerts.ChannelSlack, URL: "http://127.0.0.1:1/services/T000/B000/SECRETPART"}, "d1",
		[]byte(`{"state":"firing"}`))
	if err == nil || strings.Contains(err.Error(), "SECRETPART") {
		t.Fatalf("Send to a closed port = %v, want an error without the URL", err)
	}
}
