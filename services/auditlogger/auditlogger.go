// Package auditlogger holds the domain of Threat View's audit trail: the
// rules an audit record must follow before it is published or stored, the
// query over stored records with its keyset cursor, the roles the HTTP API
// and the worker depend on (Publisher, Store). The configuration of the two
// binaries lives in their commands (cmd/auditlogger, cmd/auditworker).
//
// The wire format of a record is wire.AuditRecord; this package adds the
// storage rules (column sizes, IP and digest formats) so that a record the
// logger accepts is always storable and the worker never retries a row the
// database can only refuse.
package auditlogger

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"
	"unicode/utf8"

	"threatview/platform/wire"
)

// Sentinel errors. Adapters wrap them; the HTTP API maps them to statuses.
var (
	// ErrInvalid means a record or query breaks a rule; the error names the
	// field (see FieldError).
	ErrInvalid = errors.New("invalid")
	// ErrTooLarge means a request carries more than the limits allow.
	ErrTooLarge = errors.New("too large")
	// ErrMalformed means a body is not JSON of the expected shape.
	ErrMalformed = errors.New("malformed")
	// ErrUnavailable means the broker or the database cannot be reached now;
	// the caller may retry later.
	ErrUnavailable = errors.New("unavailable")
)

// Column limits of audit_events (bytes; the columns count characters, so a
// byte limit is always within them).
const (
	MaxTokenID   = 64
	MaxAppID     = 128
	MaxAction    = 64
	MaxResource  = 255
	MaxUserAgent = 512
	MaxRequestID = 64
	// MaxBody is the largest stored request body (MEDIUMBLOB holds 16 MiB).
	MaxBody = 8 << 20
)

// Earliest and latest storable times (DATETIME covers 1000-9999; the trail
// has no business outside these).
var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// FieldError says which field of which record broke which rule.
type FieldError struct {
	Index  int    // record index in the batch; -1 for a single record or a query
	Field  string // JSON name of the field
	Reason string
}

func (e *FieldError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("records[%d].%s: %s", e.Index, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true for a FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Normalize brings a record into its stored form in place: UTC time in
// microseconds, free-text fields (resource, user agent, request id) cut to
// their column size at a character boundary, and the body dropped unless
// keepBody. It never fails: these fields come from clients and must not make
// an audited request fail.
func Normalize(r *wire.AuditRecord, keepBody bool) {
	// The column keeps microseconds; the stored time is the dedup key.
	r.Time = r.Time.UTC().Truncate(time.Microsecond)
	r.Resource = wire.Truncate(r.Resource, MaxResource)
	r.UserAgent = wire.Truncate(r.UserAgent, MaxUserAgent)
	r.RequestID = wire.Truncate(r.RequestID, MaxRequestID)
	if !keepBody {
		r.Body = nil
	}
}

// Validate checks that a (normalized) record is storable; the error is a
// *FieldError carrying index. It is stricter than wire.AuditRecord.Validate.
func Validate(r *wire.AuditRecord, index int) error {
	fail := func(field, reason string) error { return &FieldError{Index: index, Field: field, Reason: reason} }
	switch {
	case !wire.IsUUID(r.ID):
		return fail("id", "not a UUID")
	case r.Time.IsZero():
		return fail("time", "missing")
	case r.Time.Before(minTime) || !r.Time.Before(maxTime):
		return fail("time", "out of range")
	case r.Action == "":
		return fail("action", "empty")
	case len(r.Action) > MaxAction:
		return fail("action", fmt.Sprintf("longer than %d bytes", MaxAction))
	case r.Outcome < 100 || r.Outcome > 599:
		return fail("outcome", "not an HTTP status")
	case r.EventCount < 0 || r.EventCount > math.MaxInt32:
		return fail("event_count", "out of range")
	case len(r.ActorToken) > MaxTokenID:
		return fail("actor_token_id", fmt.Sprintf("longer than %d bytes", MaxTokenID))
	case len(r.ActorApp) > MaxAppID:
		return fail("actor_app_id", fmt.Sprintf("longer than %d bytes", MaxAppID))
	case len(r.Resource) > MaxResource:
		return fail("resource", fmt.Sprintf("longer than %d bytes", MaxResource))
	case len(r.UserAgent) > MaxUserAgent:
		return fail("user_agent", fmt.Sprintf("longer than %d bytes", MaxUserAgent))
	case len(r.RequestID) > MaxRequestID:
		return fail("request_id", fmt.Sprintf("longer than %d bytes", MaxRequestID))
	case len(r.Body) > MaxBody:
		return fail("body", fmt.Sprintf("longer than %d bytes", MaxBody))
	}
	for _, f := range [...]struct{ name, v string }{
		{"actor_token_id", r.ActorToken}, {"actor_app_id", r.ActorApp}, {"action", r.Action},
		{"resource", r.Resource}, {"user_agent", r.UserAgent}, {"request_id", r.RequestID},
	} {
		if !utf8.ValidString(f.v) {
			return fail(f.name, "not valid UTF-8")
		}
	}
	if r.ClientIP != "" {
		if _, err := netip.ParseAddr(r.ClientIP); err != nil {
			return fail("client_ip", "not an IP address")
		}
	}
	if r.BodySHA256 != "" {
		if len(r.BodySHA256) != 64 {
			return fail("body_sha256", "not 64 hex digits")
		}
		if _, err := hex.DecodeString(r.BodySHA256); err != nil {
			return fail("body_sha256", "not 64 hex digits")
		}
	}
	// The wire rules are a subset of the above; kept as a backstop so a
	// record this accepts is never one the worker's decoder refuses.
	if err := r.Validate(); err != nil {
		return fail("record", err.Error())
	}
	return nil
}

// ParseID returns the 16 bytes of a canonical UUID string.
func ParseID(s string) ([16]byte, bool) {
	var id [16]byte
	if !wire.IsUUID(s) {
		return id, false
	}
	j := 0
	for i := 0; i < 36; i += 2 {
		if s[i] == '-' {
			i--
			continue
		}
		id[j] = unhex(s[i])<<4 | unhex(s[i+1])
		j++
	}
	return id, true
}

// FormatID renders 16 bytes as a lowercase canonical UUID string.
func FormatID(id [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// Filter selects stored records; zero fields do not filter. Records come in
// ascending (time, id) order, starting after After when set.
type Filter struct {
	From   time.Time // inclusive
	To     time.Time // exclusive
	Actor  string    // actor token id
	Action string
	AppID  string
	Limit  int
	After  *Cursor
}

// Default and largest page sizes of a query.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Cursor is the position after the last record of a page: its (time, id),
// the table's primary key.
type Cursor struct {
	Time time.Time
	ID   [16]byte
}

// Encode renders the cursor as an opaque URL-safe string.
func (c Cursor) Encode() string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.Time.UnixMicro()))
	copy(b[8:], c.ID[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// DecodeCursor parses a string made by Cursor.Encode; any other string is
// ErrInvalid.
func DecodeCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 24 {
		return Cursor{}, &FieldError{Index: -1, Field: "cursor", Reason: "not a cursor from a previous page"}
	}
	var c Cursor
	c.Time = time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC()
	copy(c.ID[:], b[8:])
	return c, nil
}

// Page is one page of a query. Next is nil on the last page.
type Page struct {
	Records []wire.AuditRecord
	Next    *Cursor
}

// Publisher hands records to the broker.
type Publisher interface {
	// Publish returns once the records are durable on the broker. It returns
	// an error wrapping ErrUnavailable when the broker is down or slow; the
	// records may or may not have been kept then (they are deduplicated on
	// their id when sent again).
	Publish(ctx context.Context, records []wire.AuditRecord) error
}

// Store keeps audit records.
type Store interface {
	// Insert stores records, skipping any already stored (same time and id),
	// all in one transaction; it returns how many were new. Errors wrap
	// ErrUnavailable when the database cannot be reached.
	Insert(ctx context.Context, records []wire.AuditRecord) (int, error)
	// Query returns one page of records matching f. Errors wrap ErrInvalid
	// for a bad filter and ErrUnavailable when the database cannot be reached.
	Query(ctx context.Context, f Filter) (Page, error)
}
