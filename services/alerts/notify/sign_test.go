package notify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"threatview/alerts"
	"threatview/alerts/notify"
)

const secret32 = "0123456789abcdef0123456789abcdef"

// TestSender_WebhookSignature: a webhook delivery is signed over its time,
// its delivery id and its body (issue 37 item 8); a receiver using Verify
// takes it once, and refuses it replayed later, under another delivery
// id, or with another body.
func TestSender_WebhookSignature(t *testing.T) {
	var sig, id string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sig, id = r.Header.Get(notify.SignatureHeader), r.Header.Get(notify.DeliveryHeader)
		body = make([]byte, r.ContentLength)
		_, _ = r.Body.Read(body)
	}))
	defer srv.Close()
	at := time.Unix(1_796_292_000, 0)
	s := newSender(t, time.Second)
	s.Now = func() time.Time { return at }
	sent := []byte(`{"rule_id":"r1","state":"firing"}`)
	if err := s.Send(context.Background(), alerts.Channel{Type: alerts.ChannelWebhook, URL: srv.URL, Secret: secret32}, "d-1", sent); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sig, "t=1796292000,v1=") || id != "d-1" || string(body) != string(sent) {
		t.Fatalf("signature %q, delivery %q, body %q; want t=1796292000,v1=<hex>, d-1 and the body", sig, id, body)
	}
	for _, tc := range []struct {
		name     string
		delivery string
		body     string
		now      time.Time
		ok       bool
	}{
		{"OK", "d-1", string(sent), at.Add(time.Minute), true},
		{"replayed after the window", "d-1", string(sent), at.Add(notify.VerifyWindow + time.Second), false},
		{"from the future", "d-1", string(sent), at.Add(-notify.VerifyWindow - time.Second), false},
		{"another delivery id", "d-2", string(sent), at, false},
		{"another body", "d-1", `{"rule_id":"r1","state":"resolved"}`, at, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := notify.Verify(secret32, sig, tc.delivery, []byte(tc.body), tc.now, notify.VerifyWindow)
			if (err == nil) != tc.ok {
				t.Fatalf("Verify(%q, %q, %s) = %v, want ok %v", sig, tc.delivery, tc.now, err, tc.ok)
			}
		})
	}
	if err := notify.Verify("another secret of thirty-two bytes", sig, "d-1", sent, at, notify.VerifyWindow); err == nil {
		t.Fatal("Verify with another secret succeeded")
	}
}

// TestChannel_WebhookSecret: a webhook's secret is at least 32 bytes.
func TestChannel_WebhookSecret(t *testing.T) {
	for secret, ok := range map[string]bool{"": false, "k": false, secret32[:31]: false, secret32: true} {
		r := alerts.Rule{Name: "x", WindowSeconds: 60, Threshold: 1,
			Channel: alerts.Channel{Type: alerts.ChannelWebhook, URL: "https://hooks.example.com/x", Secret: secret}}
		if err := r.Validate(); (err == nil) != ok {
			t.Errorf("Validate with a secret of %d bytes = %v, want ok %v", len(secret), err, ok)
		}
	}
}
