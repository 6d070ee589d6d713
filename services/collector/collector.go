// Package collector is the data collector's domain: the events apps post,
// their validation and enrichment into wire.Event, the interfaces the HTTP
// layer needs (token checks, country lookup), the sentinel errors the HTTP
// layer maps to statuses. The service configuration lives in cmd/collector.
package collector

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Limits of the public contract.
const (
	// MaxEventBytes is the largest single event, after decompression.
	MaxEventBytes = 32 << 10
	// MaxRequestBytes is the largest request body, after decompression.
	MaxRequestBytes = 1 << 20
	// MaxBatchEvents is the most events one request may carry.
	MaxBatchEvents = 500
	// UnknownCountry is the country of an address the GeoIP database does
	// not know (or of every address when no database is configured).
	UnknownCountry = "ZZ"
	// MaxFutureSkew is how far in the future occurred_at may be before it is
	// clamped to received_at.
	MaxFutureSkew = 23 * time.Hour
)

// Sentinel errors. The HTTP layer maps each to one status with errors.Is.
var (
	// ErrMalformed means the body is not JSON or not the expected shape (400).
	ErrMalformed = errors.New("malformed request body")
	// ErrInvalid means a field is missing, unknown or of the wrong type or
	// format (422). Errors wrapping it are usually a *FieldError.
	ErrInvalid = errors.New("invalid event")
	// ErrTooLarge means an event, the body or the batch exceeds a limit (413).
	ErrTooLarge = errors.New("request too large")
	// ErrUnsupportedMediaType means the content type or encoding is not
	// accepted (415).
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	// ErrUnauthorized means the bearer token is missing, unknown or revoked (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden means an event names an app the token is not bound to (403).
	ErrForbidden = errors.New("forbidden")
	// ErrRateLimited means the app sent more than its rate allows (429).
	ErrRateLimited = errors.New("rate limited")
	// ErrOverloaded means too many requests are in flight (503).
	ErrOverloaded = errors.New("too many requests in flight")
	// ErrUnavailable means a dependency (broker, audit logger, tokens
	// service) could not make the request durable or check it (503). The
	// client should retry; its events may or may not have been kept, which is
	// why clients send event_id for idempotency.
	ErrUnavailable = errors.New("dependency unavailable")
	// ErrUnconfirmed means the broker was sent the request's events but did
	// not confirm them (a receipt that never came): they may or may not be
	// kept (503 outcome_unknown). It wraps ErrUnavailable. The retry of such
	// a request stores nothing twice when its events carry event_id or the
	// request an Idempotency-Key.
	ErrUnconfirmed = fmt.Errorf("%w: outcome unknown", ErrUnavailable)
)

// FieldError is a validation failure naming the event (Index, -1 when the
// body is not a batch) and the field path.
type FieldError struct {
	Index   int
	Field   string
	Message string
	// Err is the sentinel the failure maps to (ErrInvalid, ErrTooLarge or
	// ErrForbidden).
	Err error
}

func (e *FieldError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("event %d: %s: %s", e.Index, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// Identity is who a token belongs to.
type Identity struct {
	TokenID string
	AppID   string
}

// Authenticator checks app tokens.
type Authenticator interface {
	// Check returns the identity of token. It returns ErrUnauthorized for an
	// unknown, revoked or malformed token and ErrUnavailable when the token
	// cannot be checked now.
	Check(ctx context.Context, token string) (Identity, error)
}

// Locator maps a client address to an ISO 3166-1 alpha-2 country code.
type Locator interface {
	// Country returns the country of ip, or UnknownCountry.
	Country(ip netip.Addr) string
}

// ParsePrefixes parses CIDRs (a bare address counts as a /32 or /128).
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR or address", s)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Request is what enrichment needs to know about the HTTP request besides
// the events.
type Request struct {
	Identity   Identity
	RemoteAddr string // peer "host:port"
	XFF        string // X-Forwarded-For, "" when absent
	RequestID  string
	ReceivedAt time.Time
}
