// Package tokens issues, lists, revokes and introspects app tokens.
//
// An app token binds its bearer to one app id. The plain token is shown once,
// when it is created; only its SHA-256 is stored. Operators manage tokens with
// the admin key; the collector asks /v1/introspect (with the internal key)
// whether a token is active and caches the answer.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Adapters translate driver errors into them; the httpapi
// package maps them to HTTP statuses.
var (
	// ErrNotFound means no token has the given id (or hash).
	ErrNotFound = errors.New("token not found")
	// ErrInvalid means a request is well-formed but breaks a rule, for
	// example an app id with forbidden characters.
	ErrInvalid = errors.New("invalid input")
	// ErrMalformed means a request cannot be parsed, for example an id that
	// is not a UUID.
	ErrMalformed = errors.New("malformed input")
	// ErrConflict means a token with the same id or hash already exists.
	ErrConflict = errors.New("token already exists")
	// ErrAuditUnavailable means the audit logger could not record an
	// action. Auditing is a promise: the action is not confirmed without it.
	ErrAuditUnavailable = errors.New("audit logger unavailable")
	// ErrNotAnnounced means a token was revoked in the database but the
	// broker did not confirm the announcement to the collectors; repeating
	// the revocation announces it again.
	ErrNotAnnounced = errors.New("revocation not announced to the collectors")
)

// Prefix starts every app token so secret scanners can recognise one.
const Prefix = "tvk_"

// secretBytes is the number of random bytes in a token.
const secretBytes = 32

// PlainLen is the length of a plain token: the prefix and 32 bytes in
// unpadded base64url.
var PlainLen = len(Prefix) + base64.RawURLEncoding.EncodedLen(secretBytes)

// Token is an app token as stored; it never holds the plain token.
type Token struct {
	ID         string
	AppID      string
	Name       string
	Hash       [sha256.Size]byte
	CreatedAt  time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

// Active reports whether the token has not been revoked.
func (t Token) Active() bool { return t.RevokedAt == nil }

// Filter selects tokens to list.
type Filter struct {
	AppID string // blank: every app
	Limit int
}

// Store keeps tokens. Implementations live in adapter packages (mariadb).
type Store interface {
	// Create inserts t. confirm, when not nil, runs after the insert and
	// before the commit; when it fails the insert is rolled back and its
	// error returned. Returns ErrConflict on a duplicate id or hash.
	Create(ctx context.Context, t Token, confirm func(context.Context) error) error
	// Get returns the token with id, or ErrNotFound.
	Get(ctx context.Context, id string) (Token, error)
	// List returns the tokens matching f, newest first.
	List(ctx context.Context, f Filter) ([]Token, error)
	// Revoke sets revoked_at to at unless the token is already revoked and
	// returns the token as stored afterwards. Returns ErrNotFound.
	Revoke(ctx context.Context, id string, at time.Time) (Token, error)
	// Active returns at most limit active tokens, most recently used or
	// created first (a collector's cache warm-up).
	Active(ctx context.Context, limit int) ([]Token, error)
	// ByHash returns the token whose hash is h, or ErrNotFound.
	ByHash(ctx context.Context, h [sha256.Size]byte) (Token, error)
	// TouchLastUsed raises last_used_at of each token id to the given time.
	TouchLastUsed(ctx context.Context, used map[string]time.Time) error
	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
}

// Announcer tells every collector that a token was revoked.
type Announcer interface {
	// Announce returns once the announcement is durable at the broker. It
	// returns an error wrapping ErrNotAnnounced otherwise.
	Announce(ctx context.Context, t Token) error
}

// NewPlain returns a fresh plain token (Prefix and 32 random bytes from
// crypto/rand in base64url) and its SHA-256 hash.
func NewPlain() (string, [sha256.Size]byte, error) {
	var b [secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [sha256.Size]byte{}, fmt.Errorf("read random bytes: %w", err)
	}
	plain := Prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return plain, HashPlain(plain), nil
}

// HashPlain returns the SHA-256 of a plain token, the only form stored.
func HashPlain(plain string) [sha256.Size]byte {
	return sha256.Sum256([]byte(plain))
}

// WellFormed reports whether s has the shape of a plain token: the prefix
// followed by 43 base64url characters. It lets callers refuse garbage
// without a database lookup.
func WellFormed(s string) bool {
	if len(s) != PlainLen || s[:len(Prefix)] != Prefix {
		return false
	}
	for i := len(Prefix); i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Limits on token fields.
const (
	MaxAppIDLen = 128
	MaxNameLen  = 200
)

// ValidateAppID checks an app id: 1 to 128 characters of [A-Za-z0-9._-].
// The error wraps ErrInvalid.
func ValidateAppID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: app_id is required", ErrInvalid)
	}
	if len(id) > MaxAppIDLen {
		return fmt.Errorf("%w: app_id is longer than %d characters", ErrInvalid, MaxAppIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: app_id may contain only letters, digits, '.', '_' and '-'", ErrInvalid)
		}
	}
	return nil
}
