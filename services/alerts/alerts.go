// Package alerts is the alerts service's domain: alert rules over the
// threat events the processor committed, their transitions and
// notifications, and forwarders that copy the threat events to a SIEM.
//
// The processor writes one alerts.outbox row per stored threat event in the
// transaction that stores it. The active replica (one, by an advisory lock)
// follows that outbox: it folds it into exact per-minute counts, evaluates
// the rules on them, and feeds each forwarder from its own cursor.
package alerts

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/mail"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Errors the Store and the validators return; httpapi maps them to statuses.
var (
	// ErrNotFound means no live rule or forwarder has the id.
	ErrNotFound = errors.New("not found")
	// ErrInvalid wraps a validation failure; its message names the field.
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable means the database (or the audit logger) did not
	// answer; nothing was changed.
	ErrUnavailable = errors.New("unavailable")
)

// Channel types.
const (
	ChannelWebhook = "webhook"
	ChannelSlack   = "slack"
	ChannelEmail   = "email"
)

// MinSecret is the shortest webhook secret accepted, in bytes.
const MinSecret = 32

// Channel is where a rule's notifications go. Secret keys the webhook's
// HMAC signature; it is stored, never shown again.
type Channel struct {
	Type   string `json:"type"`
	URL    string `json:"url,omitempty"`
	To     string `json:"to,omitempty"`
	Secret string `json:"secret,omitempty"`
}

// Rule kinds.
const (
	// KindCount fires when the sightings in the window reach Threshold.
	KindCount = "count"
	// KindBaseline fires when the sightings in the window reach both
	// Threshold (a minimum) and Factor times the baseline: the mean count
	// of the same window at the same time of day over the 7 days before.
	KindBaseline = "baseline"
)

// Rule is an alert rule. AppID and Threat blank mean all apps, any threat;
// Country and OS blank mean any country, any OS.
type Rule struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	AppID  string `json:"app_id"`
	Threat string `json:"threat"`
	// Country is an ISO 3166-1 alpha-2 code (ZZ: the collector could not
	// place the client), OS one of OSFamilies.
	Country       string     `json:"country"`
	OS            string     `json:"os"`
	Kind          string     `json:"kind"`
	WindowSeconds int        `json:"window_seconds"`
	Threshold     int64      `json:"threshold"`
	Factor        float64    `json:"factor,omitempty"`
	Channel       Channel    `json:"channel"`
	SilencedUntil *time.Time `json:"silenced_until,omitempty"`
	CreatedBy     string     `json:"created_by"`
	CreatedAt     time.Time  `json:"created_at"`
	// State is "ok" or "firing" (read only).
	State string `json:"state"`
}

// Public returns r as shown to a reader and written to the audit trail:
// the channel secret is left out and the URL cut to its scheme and host (a
// Slack webhook URL's path is the credential itself; a query string often
// holds a token).
func (r Rule) Public() Rule {
	r.Channel.Secret = ""
	r.Channel.URL = RedactURL(r.Channel.URL)
	return r
}

var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// RedactURLs cuts every URL in s (an error message stored as last_error,
// read by analysts) to its scheme and host.
func RedactURLs(s string) string {
	return urlInText.ReplaceAllStringFunc(s, func(u string) string {
		if r := RedactURL(u); r != "" {
			return r
		}
		return "<url>"
	})
}

// RedactURL returns raw's scheme and host (with its port), dropping user
// information, path, query and fragment; "" when raw is not a URL with a
// host.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// ResolveBelow is the hysteresis: a firing rule resolves when its value
// falls to ResolveAt(threshold) or below, 80 % of the threshold, so a value
// that hovers at the threshold does not flap.
func ResolveAt(threshold int64) int64 { return threshold * 4 / 5 }

// Transition is one change of a rule's state.
type Transition struct {
	ID        int64     `json:"id"`
	RuleID    string    `json:"rule_id"`
	State     string    `json:"state"` // firing or resolved
	Value     int64     `json:"value"`
	Threshold int64     `json:"threshold"`
	At        time.Time `json:"at"`
	Silenced  bool      `json:"silenced"`
	// Notification is the delivery's status: pending, sent, dead, or blank
	// when silenced.
	Notification string `json:"notification,omitempty"`
	Attempts     int    `json:"attempts,omitempty"`
	LastError    string `json:"last_error,omitempty"`
}

// Notification is the webhook body of one transition (DESIGN.md, Alerts).
type Notification struct {
	RuleID        string    `json:"rule_id"`
	Name          string    `json:"name"`
	State         string    `json:"state"`
	Value         int64     `json:"value"`
	Threshold     int64     `json:"threshold"`
	WindowSeconds int       `json:"window_seconds"`
	AppID         string    `json:"app_id"`
	Threat        string    `json:"threat"`
	Country       string    `json:"country,omitempty"`
	OS            string    `json:"os,omitempty"`
	At            time.Time `json:"at"`
}

// Forwarder types and formats.
const (
	ForwardSyslog = "syslog"
	ForwardHTTP   = "http"
	ForwardS3     = "s3"
	FormatCEF     = "cef"
	FormatOCSF    = "ocsf"
)

// Forwarder copies the threat events matching its filters to a SIEM.
type Forwarder struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	URL     string   `json:"url"`
	Format  string   `json:"format"`
	AppIDs  []string `json:"app_ids"`
	Threats []string `json:"threats"`
	CAPEM   string   `json:"ca_pem,omitempty"`
	// SecretHeader is sent with every batch of an http forwarder (a SIEM's
	// token); its value is written once and never shown again.
	SecretHeader *SecretHeader `json:"secret_header,omitempty"`
	CreatedBy    string        `json:"created_by"`
	CreatedAt    time.Time     `json:"created_at"`
}

// SecretHeader is a header name and its secret value.
type SecretHeader struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

// Public returns f as shown to a reader and written to the audit trail: the
// URL cut to its scheme and host, the secret header's name without its
// value.
func (f Forwarder) Public() Forwarder {
	f.URL = RedactURL(f.URL)
	if f.SecretHeader != nil {
		f.SecretHeader = &SecretHeader{Name: f.SecretHeader.Name}
	}
	return f
}

// Matches reports whether e passes f's filters.
func (f *Forwarder) Matches(e *Event) bool {
	if len(f.AppIDs) > 0 && !contains(f.AppIDs, e.AppID) {
		return false
	}
	if len(f.Threats) == 0 {
		return true
	}
	for _, t := range e.Threats {
		if contains(f.Threats, t) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ForwarderStatus is GET /v1/forwarders/{id}/status.
type ForwarderStatus struct {
	Delivered int64 `json:"delivered"`
	Pending   int64 `json:"pending"`
	Failed    int64 `json:"failed"`
	// Skipped counts outbox rows passed unsent because the forwarder's
	// backlog reached its bound.
	Skipped    int64   `json:"skipped"`
	LagSeconds float64 `json:"lag_seconds"`
	LastError  string  `json:"last_error,omitempty"`
}

// Event is one outbox row: a stored threat event, number Seq of its
// writer's Shard.
type Event struct {
	Shard       int16
	Seq         int64
	ID          string
	AppID       string
	ReceivedAt  time.Time
	OccurredAt  time.Time
	Type        string
	AppVersion  string
	DeviceModel string
	OS          string
	OSVersion   string
	Country     string
	Threats     []string
}

// Position is a reader's place in the outbox, one per shard. Each events
// shard's processor numbers its rows in its own commit order (a later
// commit, larger numbers), and the shards' numbers interleave in any order,
// so a reader that has read shard k up to seq n has read every row of k
// below n, and nothing of the other shards follows from it. Base is the
// place in each shard Shards does not name (a shard that had no rows yet).
type Position struct {
	Base   int64
	Shards map[int16]int64
}

// In returns the place in shard k.
func (p Position) In(k int16) int64 {
	if s, ok := p.Shards[k]; ok {
		return s
	}
	return p.Base
}

// After returns p moved past events, rows read after p: each shard's rows
// in its order, as the Store returns them. p is not changed.
func (p Position) After(events []Event) Position {
	next := Position{Base: p.Base, Shards: make(map[int16]int64, len(p.Shards)+1)}
	for k, s := range p.Shards {
		next.Shards[k] = s
	}
	for _, e := range events {
		if e.Seq > next.In(e.Shard) {
			next.Shards[e.Shard] = e.Seq
		}
	}
	return next
}

// Sink sends a batch of formatted events to one destination.
type Sink interface {
	// Send returns nil once the destination has them (as far as its
	// protocol tells); an error means the batch is to be sent again.
	Send(ctx context.Context, events []Event) error
	Close() error
}

// Limits of the API's fields.
const (
	maxName  = 128
	maxKey   = 128
	maxList  = 100
	maxPEM   = 64 << 10
	maxValue = 1_000_000_000
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Validate checks a rule as posted and fills defaults.
func (r *Rule) Validate() error {
	r.Name = strings.TrimSpace(r.Name)
	r.Country = strings.ToUpper(strings.TrimSpace(r.Country))
	r.OS = strings.ToLower(strings.TrimSpace(r.OS))
	switch {
	case r.Name == "" || len(r.Name) > maxName || hasControl(r.Name):
		// No control characters: the name goes into an email's Subject,
		// where a CR LF would start a header of the poster's choosing.
		return invalid("name must be 1 to %d printable characters", maxName)
	case len(r.AppID) > maxKey || hasControl(r.AppID):
		return invalid("app_id must be at most %d printable characters", maxKey)
	case len(r.Threat) > maxKey || hasControl(r.Threat):
		return invalid("threat must be at most %d printable characters", maxKey)
	case !validCountry(r.Country):
		return invalid("country must be an ISO 3166-1 alpha-2 code (ZZ: unknown) or blank for any")
	case !validOS(r.OS):
		return invalid("os must be one of %s, or blank for any", strings.Join(OSFamilies, ", "))
	case r.WindowSeconds < 60 || r.WindowSeconds > 86400:
		return invalid("window_seconds must be 60 to 86400")
	case r.Threshold < 1 || r.Threshold > maxValue:
		return invalid("threshold must be 1 to %d", maxValue)
	}
	switch r.Kind {
	case "":
		r.Kind = KindCount
	case KindCount:
	case KindBaseline:
		if r.Factor < 1 || r.Factor > 1000 {
			return invalid("factor must be 1 to 1000 for a baseline rule")
		}
	default:
		return invalid("kind must be count or baseline")
	}
	if r.Kind == KindCount && r.Factor != 0 {
		return invalid("factor applies to baseline rules only")
	}
	return r.Channel.validate()
}

func (c *Channel) validate() error {
	if len(c.Secret) > 256 {
		return invalid("channel.secret must be at most 256 characters")
	}
	switch c.Type {
	case ChannelWebhook, ChannelSlack:
		// A short secret can be guessed from one signed delivery offline.
		if c.Type == ChannelWebhook && len(c.Secret) < MinSecret {
			return invalid("channel.secret of a webhook must be at least %d bytes", MinSecret)
		}

		if err := httpURL("channel.url", c.URL); err != nil {
			return err
		}
		if c.To != "" {
			return invalid("channel.to applies to email only")
		}
	case ChannelEmail:
		a, err := mail.ParseAddress(c.To)
		if err != nil || a.Name != "" || len(c.To) > 254 {
			return invalid("channel.to must be one email address")
		}
		if c.URL != "" {
			return invalid("channel.url applies to webhook and slack only")
		}
	default:
		return invalid("channel.type must be webhook, slack or email")
	}
	return nil
}

func httpURL(field, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s) > 2048 {
		return invalid("%s must be an http(s) URL", field)
	}
	return nil
}

// Validate checks a forwarder as posted.
func (f *Forwarder) Validate() error {
	f.Name = strings.TrimSpace(f.Name)
	if f.Name == "" || len(f.Name) > maxName {
		return invalid("name must be 1 to %d characters", maxName)
	}
	if f.Format != FormatCEF && f.Format != FormatOCSF {
		return invalid("format must be cef or ocsf")
	}
	u, err := url.Parse(f.URL)
	if err != nil || len(f.URL) > 2048 {
		return invalid("url is not a URL")
	}
	switch f.Type {
	case ForwardSyslog:
		if (u.Scheme != "tcp" && u.Scheme != "tls") || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
			return invalid("url of a syslog forwarder must be tcp://host:port or tls://host:port")
		}
	case ForwardHTTP:
		if err := httpURL("url", f.URL); err != nil {
			return err
		}
		if f.Format != FormatOCSF {
			return invalid("an http forwarder sends format ocsf")
		}
	case ForwardS3:
		if u.Scheme != "s3" || u.Host == "" {
			return invalid("url of an s3 forwarder must be s3://bucket/prefix")
		}
		if f.Format != FormatOCSF {
			return invalid("an s3 forwarder sends format ocsf")
		}
	default:
		return invalid("type must be syslog, http or s3")
	}
	if f.AppIDs == nil {
		f.AppIDs = []string{}
	}
	if f.Threats == nil {
		f.Threats = []string{}
	}
	for _, l := range [][]string{f.AppIDs, f.Threats} {
		if len(l) > maxList {
			return invalid("app_ids and threats hold at most %d entries", maxList)
		}
		for _, s := range l {
			if s == "" || len(s) > maxKey || hasControl(s) {
				return invalid("app_ids and threats entries must be 1 to %d printable characters", maxKey)
			}
		}
	}
	if h := f.SecretHeader; h != nil {
		if f.Type != ForwardHTTP {
			return invalid("secret_header applies to http forwarders only")
		}
		h.Name = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(h.Name))
		if !headerToken(h.Name) || reservedHeaders[h.Name] {
			return invalid("secret_header.name must be a header name other than %s", strings.Join(reservedHeaderNames, ", "))
		}
		if h.Value == "" || len(h.Value) > 4096 || hasControl(h.Value) {
			return invalid("secret_header.value must be 1 to 4096 printable characters")
		}
	}
	if f.CAPEM != "" {
		if f.Type == ForwardS3 || len(f.CAPEM) > maxPEM {
			return invalid("ca_pem applies to tls and https forwarders, at most %d bytes", maxPEM)
		}
		if _, err := CertPool(f.CAPEM); err != nil {
			return err
		}
	}
	return nil
}

// CertPool parses PEM certificates into a pool.
func CertPool(pemText string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	rest := []byte(pemText)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if b.Type != "CERTIFICATE" || err != nil {
			return nil, invalid("ca_pem holds a block that is not a certificate")
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return nil, invalid("ca_pem must be PEM certificates")
	}
	return pool, nil
}

// reservedHeaderNames are set by the HTTP sink itself.
var reservedHeaderNames = []string{"Host", "Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "User-Agent"}

var reservedHeaders = func() map[string]bool {
	m := map[string]bool{}
	for _, h := range reservedHeaderNames {
		m[h] = true
	}
	return m
}()

// headerToken reports whether s is an RFC 9110 field name.
func headerToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
