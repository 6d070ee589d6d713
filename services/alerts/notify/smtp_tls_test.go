package notify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"threatview/alerts"
	"threatview/alerts/internal/eximtest"
	"threatview/alerts/notify"
)

// TestSender_EmailTLS (issue 37 item 10) sends through a real mail server
// (Exim, started by the test with a certificate of a test CA): STARTTLS is
// used by default and required: a relay that does not offer it, or whose
// certificate does not verify, gets nothing; implicit TLS works; plain text
// only when chosen explicitly.
func TestSender_EmailTLS(t *testing.T) {
	n := alerts.Notification{RuleID: "r1", Name: "hooking spike", State: "firing", Value: 63, Threshold: 50,
		WindowSeconds: 300, AppID: "demo-app", Threat: "hooking", At: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	body, _ := json.Marshal(n)
	to := alerts.Channel{Type: alerts.ChannelEmail, To: "secteam@threatview.test"}
	send := func(relay notify.SMTP, id string) error {
		relay.From = "alerts@threatview.test"
		return newSender(t, 10*time.Second, relay).Send(context.Background(), to, id, body)
	}
	pool := func(s *eximtest.Server) *notify.SMTP {
		p, err := alerts.CertPool(s.CAPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &notify.SMTP{Addr: s.Addr, RootCAs: p}
	}

	t.Run("STARTTLS by default", func(t *testing.T) {
		srv := eximtest.Start(t, eximtest.StartTLS)
		relay := pool(srv)
		if err := send(*relay, "d-starttls"); err != nil {
			t.Fatalf("Send = %v", err)
		}
		msgs := srv.Messages(t, 1, 10*time.Second)
		if len(msgs) != 1 || !strings.Contains(msgs[0], "esmtps ") || !strings.Contains(msgs[0], "(TLS1.") ||
			!strings.Contains(msgs[0], "X-ThreatView-Delivery: d-starttls") {
			t.Fatalf("Exim delivered %q, want one message received over TLS (esmtps) with its delivery id", msgs)
		}
		// The certificate must verify: the system's CAs do not know the
		// test CA.
		if err := send(notify.SMTP{Addr: srv.Addr}, "d-untrusted"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("Send to a relay with an untrusted certificate = %v, want a certificate error", err)
		}
		if msgs := srv.Messages(t, 2, time.Second); len(msgs) != 1 {
			t.Fatalf("Exim has %d messages, want only the first", len(msgs))
		}
	})

	t.Run("no STARTTLS offered", func(t *testing.T) {
		srv := eximtest.Start(t, eximtest.Plain)
		if err := send(*pool(srv), "d-refused"); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
			t.Fatalf("Send to a relay without STARTTLS = %v, want it refused", err)
		}
		if msgs := srv.Messages(t, 1, time.Second); len(msgs) != 0 {
			t.Fatalf("Exim received %q in plain text", msgs)
		}
		relay := pool(srv)
		relay.TLS = notify.TLSNone // chosen explicitly
		if err := send(*relay, "d-plain"); err != nil {
			t.Fatalf("Send with ALERTS_SMTP_TLS=none = %v", err)
		}
		if msgs := srv.Messages(t, 1, 10*time.Second); len(msgs) != 1 || (strings.Contains(msgs[0], "esmtps") || !strings.Contains(msgs[0], "esmtp ")) {
			t.Fatalf("Exim delivered %q, want one plain message", msgs)
		}
	})

	t.Run("implicit TLS", func(t *testing.T) {
		srv := eximtest.Start(t, eximtest.Implicit)
		relay := pool(srv)
		relay.TLS = notify.TLSImplicit
		if err := send(*relay, "d-implicit"); err != nil {
			t.Fatalf("Send = %v", err)
		}
		if msgs := srv.Messages(t, 1, 10*time.Second); len(msgs) != 1 || !strings.Contains(msgs[0], "esmtps ") {
			t.Fatalf("Exim delivered %q, want one message over TLS", msgs)
		}
	})
}
