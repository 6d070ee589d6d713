// Package notify delivers a transition's notification to its rule's
// channel: a webhook (the JSON body, signed), a Slack-compatible incoming
// webhook, or an email through an SMTP relay.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"threatview/alerts"
	"threatview/alerts/egress"
)

// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 keyed
// with the channel's secret over "<t>.<delivery id>.<body>">": the time and
// the delivery id are signed with the body, so a receiver that checks the
// window (Verify) and drops delivery ids it has seen cannot be made to take
// a captured delivery again.
const SignatureHeader = "X-ThreatView-Signature"

// DeliveryHeader carries the notification's delivery id, a UUID that is the
// same on every attempt of one notification, across restarts and leaders: a
// receiver that sees it twice (a crash between its answer and our record of
// it) drops the second copy. An email carries it in this header and as its
// Message-ID (<id@threatview>).
const DeliveryHeader = "X-ThreatView-Delivery"

// MessageID is the Message-ID of the email with delivery id id.
func MessageID(id string) string { return "<" + id + "@threatview>" }

// Sign returns the signature header value of delivery id's body at t.
func Sign(secret string, t time.Time, delivery string, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + delivery + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// How mail reaches the relay (SMTP.TLS).
const (
	// TLSStartTLS upgrades the connection with STARTTLS before anything
	// else is said; a relay that does not offer it, or whose certificate
	// does not verify, gets no mail.
	TLSStartTLS = "starttls"
	// TLSImplicit speaks TLS from the first byte (submissions, port 465).
	TLSImplicit = "tls"
	// TLSNone sends in plain text; only ever chosen explicitly.
	TLSNone = "none"
)

// SMTP is the relay email goes through.
type SMTP struct {
	Addr     string // host:port; blank: email channels fail (dead-lettered)
	From     string
	Username string
	Password string
	// TLS is TLSStartTLS (also when blank), TLSImplicit or TLSNone.
	TLS string
	// RootCAs verify the relay's certificate (nil: the system's).
	RootCAs *x509.CertPool
}

// Sender sends notifications.
type Sender struct {
	HTTP *http.Client
	SMTP SMTP
	// Now is the clock of signatures (time.Now when nil).
	Now func() time.Time
}

// New returns a Sender whose HTTP calls take at most timeout, follow no
// redirect, use no proxy, and connect only where guard allows, checked on
// the address dialled (nil: egress.NewGuard(nil), no private address).
func New(timeout time.Duration, relay SMTP, guard *egress.Guard) *Sender {
	return &Sender{SMTP: relay, HTTP: &http.Client{Timeout: timeout, Transport: egress.Transport(guard, nil),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Send delivers body (an alerts.Notification as JSON) with delivery id id to
// ch; nil means the receiver accepted it.
func (s *Sender) Send(ctx context.Context, ch alerts.Channel, id string, body []byte) error {
	switch ch.Type {
	case alerts.ChannelWebhook:
		now := time.Now
		if s.Now != nil {
			now = s.Now
		}
		return s.post(ctx, ch.URL, id, body, Sign(ch.Secret, now(), id, body))
	case alerts.ChannelSlack:
		var n alerts.Notification
		if err := json.Unmarshal(body, &n); err != nil {
			return fmt.Errorf("decode notification %s: %w", id, err)
		}
		slack, _ := json.Marshal(map[string]string{"text": Text(n)})
		return s.post(ctx, ch.URL, id, slack, "")
	case alerts.ChannelEmail:
		var n alerts.Notification
		if err := json.Unmarshal(body, &n); err != nil {
			return fmt.Errorf("decode notification %s: %w", id, err)
		}
		return s.mail(ctx, ch.To, id, n)
	}
	return fmt.Errorf("channel type %q", ch.Type)
}

// Text is the one-line summary of n (Slack text, email subject).
func Text(n alerts.Notification) string {
	scope := "all apps"
	if n.AppID != "" {
		scope = "app " + n.AppID
	}
	threat := "any threat"
	if n.Threat != "" {
		threat = n.Threat
	}
	if n.Country != "" || n.OS != "" {
		scope += " (" + strings.Trim(n.Country+" "+n.OS, " ") + ")"
	}
	verb := "FIRING"
	if n.State == "resolved" {
		verb = "resolved"
	}
	return fmt.Sprintf("[Threat View] %s %s: %d sightings of %s in %s over %ds (threshold %d)",
		verb, n.Name, n.Value, threat, scope, n.WindowSeconds, n.Threshold)
}

func (s *Sender) post(ctx context.Context, url, id string, body []byte, sig string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ThreatView-Alerts")
	req.Header.Set(DeliveryHeader, id)
	if sig != "" {
		req.Header.Set(SignatureHeader, sig)
	}
	resp, err := s.HTTP.Do(req)
	var ue *neturl.Error
	if errors.As(err, &ue) {
		// Not the URL: a Slack webhook URL is itself a secret.
		return fmt.Errorf("notify: %s: %w", ue.Op, ue.Err)
	}
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("notify: receiver answered %d", resp.StatusCode)
	}
	return nil
}

func (s *Sender) mail(ctx context.Context, to, id string, n alerts.Notification) error {
	if s.SMTP.Addr == "" {
		return fmt.Errorf("email: ALERTS_SMTP_ADDR is not set")
	}
	host, _, err := net.SplitHostPort(s.SMTP.Addr)
	if err != nil {
		return fmt.Errorf("email: ALERTS_SMTP_ADDR: %w", err)
	}
	// The relay is the operator's (ALERTS_SMTP_ADDR), not a rule's: no
	// egress check.
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", s.SMTP.Addr)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	_ = conn.SetDeadline(deadline)
	tlsConf := &tls.Config{ServerName: host, RootCAs: s.SMTP.RootCAs, MinVersion: tls.VersionTLS12}
	if s.SMTP.TLS == TLSImplicit {
		tc := tls.Client(conn, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return fmt.Errorf("email TLS: %w", err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("email: %w", err)
	}
	defer c.Close()
	if s.SMTP.TLS == "" || s.SMTP.TLS == TLSStartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("email: the relay %s does not offer STARTTLS (ALERTS_SMTP_TLS=starttls); nothing sent", s.SMTP.Addr)
		}
		if err := c.StartTLS(tlsConf); err != nil {
			return fmt.Errorf("email STARTTLS: %w", err)
		}
	}
	if s.SMTP.Username != "" {
		// net/smtp's PlainAuth refuses to send the password over a
		// connection that is neither TLS nor to localhost.
		if err := c.Auth(smtp.PlainAuth("", s.SMTP.Username, s.SMTP.Password, host)); err != nil {
			return fmt.Errorf("email auth: %w", err)
		}
	}
	if err := c.Mail(s.SMTP.From); err != nil {
		return fmt.Errorf("email MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("email RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("email DATA: %w", err)
	}
	body, _ := json.MarshalIndent(n, "", "  ")
	var msg strings.Builder
	// Date is the transition's time and Message-ID the delivery id, so a
	// resend is the same message as the first copy.
	fmt.Fprintf(&msg, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: %s\r\n%s: %s\r\n",
		s.SMTP.From, to, Text(n), n.At.UTC().Format(time.RFC1123Z), MessageID(id), DeliveryHeader, id)
	msg.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	msg.WriteString(Text(n) + "\r\n\r\n")
	msg.WriteString(strings.ReplaceAll(string(body), "\n", "\r\n") + "\r\n")
	if _, err := io.WriteString(w, msg.String()); err != nil {
		return fmt.Errorf("email body: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("email end of DATA: %w", err)
	}
	return c.Quit()
}
