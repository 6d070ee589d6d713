package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"threatview/alerts"
	"threatview/alerts/notify"
)

// mailbox is a real SMTP server's backend (go-smtp) keeping each message.
type mailbox struct {
	mu   sync.Mutex
	msgs []message
}

type message struct {
	from string
	to   []string
	data string
}

type session struct {
	box *mailbox
	m   message
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{box: b}, nil }

func (s *session) Reset()        { s.m = message{} }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.m.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.m.to = append(s.m.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.m.data = string(b)
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, s.m)
	s.box.mu.Unlock()
	return nil
}

// startSMTP serves SMTP on a loopback port until the test ends.
func startSMTP(t *testing.T) (*mailbox, string) {
	t.Helper()
	box := &mailbox{}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return box, l.Addr().String()
}

func TestSender_Email(t *testing.T) {
	box, addr := startSMTP(t)
	s := notify.New(5*time.Second, notify.SMTP{Addr: addr, From: "alerts@threatview.test"})
	n := alerts.Notification{RuleID: "r1", Name: "hooking spike", State: "firing", Value: 63, Threshold: 50,
		WindowSeconds: 300, AppID: "demo-app", Threat: "hooking", At: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	body := []byte(`{"rule_id":"r1","name":"hooking spike","state":"firing","value":63,"threshold":50,"window_seconds":300,"app_id":"demo-app","threat":"hooking","at":"2026-12-02T10:00:00Z"}`)
	if err := s.Send(context.Background(), alerts.Channel{Type: alerts.ChannelEmail, To: "secteam@threatview.test"}, 7, body); err != nil {
		t.Fatalf("Send: %v", err)
	}
	box.mu.Lock()
	defer box.mu.Unlock()
	if len(box.msgs) != 1 {
		t.Fatalf("the SMTP server received %d messages, want 1", len(box.msgs))
	}
	m := box.msgs[0]
	if m.from != "alerts@threatview.test" || len(m.to) != 1 || m.to[0] != "secteam@threatview.test" {
		t.Fatalf("envelope %s -> %v", m.from, m.to)
	}
	for _, want := range []string{"Subject: " + notify.Text(n), "Message-ID: <alert-7-r1@threatview>", `"state": "firing"`} {
		if !strings.Contains(m.data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.data)
		}
	}

	// No relay configured: an error (retried, then dead-lettered), not a panic.
	none := notify.New(time.Second, notify.SMTP{})
	if err := none.Send(context.Background(), alerts.Channel{Type: alerts.ChannelEmail, To: "a@b.test"}, 8, body); err == nil {
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
	if err := notify.New(time.Second, notify.SMTP{}).Send(context.Background(), alerts.Channel{Type: alerts.ChannelSlack, URL: srv.URL}, 2, body); err != nil {
		t.Fatal(err)
	}
	want := "[Threat View] resolved spike: 3 sightings of any threat in all apps over 300s (threshold 50)"
	if len(got) != 1 || got["text"] != want || sig != "" {
		t.Fatalf("Slack body = %v (signature %q), want only text %q", got, sig, want)
	}
}

func TestSender_WebhookAndSlack(t *testing.T) {
	// A refused connection's error names no URL (a Slack URL is a secret).
	s := notify.New(time.Second, notify.SMTP{})
	err := s.Send(context.Background(), alerts.Channel{Type: alerts.ChannelSlack, URL: "http://127.0.0.1:1/services/T000/B000/SECRETPART"}, 1,
		[]byte(`{"state":"firing"}`))
	if err == nil || strings.Contains(err.Error(), "SECRETPART") {
		t.Fatalf("Send to a closed port = %v, want an error without the URL", err)
	}
}
