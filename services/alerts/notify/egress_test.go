package notify_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/alerts/internal/egresstest"
	"threatview/alerts/notify"
)

// TestSender_DialTimeCheck (issue 37 item 6): a webhook or Slack URL whose
// name now resolves to the metadata service is refused at delivery, on the
// resolved address, and nothing is dialled; a public one is dialled at the
// address checked.
func TestSender_DialTimeCheck(t *testing.T) {
	guard, rec := egresstest.Rebound(nil)
	s := notify.New(time.Second, notify.SMTP{}, guard)
	for _, ch := range []alerts.Channel{
		{Type: alerts.ChannelWebhook, URL: "http://rebound.test/hook", Secret: secret32},
		{Type: alerts.ChannelSlack, URL: "https://rebound.test/services/T0/B0/X"},
	} {
		if err := s.Send(context.Background(), ch, "d-1", []byte(`{"state":"firing"}`)); !errors.Is(err, egress.ErrDenied) {
			t.Fatalf("Send to %s = %v, want ErrDenied", ch.URL, err)
		}
	}
	if a := rec.Addrs(); len(a) != 0 {
		t.Fatalf("dialled %v", a)
	}
	err := s.Send(context.Background(), alerts.Channel{Type: alerts.ChannelWebhook, URL: "http://public.test:8080/hook", Secret: secret32}, "d-2", []byte(`{}`))
	if a := rec.Addrs(); !errors.Is(err, egresstest.ErrRecorded) || len(a) != 1 || a[0] != "93.184.215.14:8080" {
		t.Fatalf("Send to a public name = %v, dialled %v; want exactly 93.184.215.14:8080", err, a)
	}
}

// TestSender_NoRedirect: a receiver's redirect is not followed (it could
// point anywhere, past the check of the first address): the delivery fails
// and the second address is never asked.
func TestSender_NoRedirect(t *testing.T) {
	var hit atomic.Bool
	second := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer second.Close()
	first := httptest.NewServer(http.RedirectHandler(second.URL, http.StatusTemporaryRedirect))
	defer first.Close()
	err := newSender(t, time.Second).Send(context.Background(), alerts.Channel{Type: alerts.ChannelWebhook, URL: first.URL, Secret: secret32}, "d-1", []byte(`{}`))
	if err == nil || hit.Load() {
		t.Fatalf("Send to a redirecting receiver = %v, redirect followed %v; want an error and no second request", err, hit.Load())
	}
}
