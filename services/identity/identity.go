// Package identity keeps the people who operate Threat View, their roles and
// their sessions.
//
// A person signs in with a username and password (or through the company's
// identity provider, see package oidc) and receives a short-lived access
// token, an EdDSA JWT every service verifies locally against the public keys
// published at /.well-known/jwks.json (package platform/authz), and an opaque
// refresh token, stored only as its SHA-256 and rotated at every use.
// Passwords are stored only as argon2id hashes (see Hasher).
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"threatview/platform/authz"
	"threatview/platform/wire"
)

// Sentinel errors. Adapters translate driver errors into them; the httpapi
// package maps them to HTTP statuses.
var (
	// ErrNotFound means no person has the given username.
	ErrNotFound = errors.New("user not found")
	// ErrInvalid means a request breaks a rule (a bad username, a short
	// password, an unknown role).
	ErrInvalid = errors.New("invalid input")
	// ErrConflict means the username is taken, or the change would lock the
	// caller out (an admin disabling, deleting or demoting themselves).
	ErrConflict = errors.New("conflict")
	// ErrBadCredentials means a sign-in failed: unknown user, wrong password,
	// disabled person, or an invalid, expired or revoked refresh token. The
	// same error is given for each, so nobody learns which usernames exist.
	ErrBadCredentials = errors.New("invalid username or password")
	// ErrThrottled means too many failed sign-ins; see ThrottledError.
	ErrThrottled = errors.New("too many failed sign-ins")
	// ErrForbidden means the identity provider vouched for a person whose
	// groups map to no role, or who would take over a local account.
	ErrForbidden = errors.New("forbidden")
	// ErrAuditUnavailable means the audit logger could not record an action;
	// the action was not done.
	ErrAuditUnavailable = errors.New("audit logger unavailable")
	// ErrLastOwner means a change would leave no active Account Owner (a
	// person with role admin who is not locked). It wraps ErrConflict.
	ErrLastOwner = fmt.Errorf("%w: the last active Account Owner cannot be deleted, demoted or locked", ErrConflict)
)

// ThrottledError says how long to wait before the next sign-in attempt.
type ThrottledError struct {
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many failed sign-ins; retry in %s", e.RetryAfter.Round(time.Second))
}

// Unwrap makes errors.Is(err, ErrThrottled) true.
func (e *ThrottledError) Unwrap() error { return ErrThrottled }

// Sources of people.
const (
	// SourceLocal people sign in with a password kept here.
	SourceLocal = "local"
	// SourceOIDC people sign in through the identity provider; their roles
	// are set from its groups at every sign-in.
	SourceOIDC = "oidc"
)

// User is a person as stored.
type User struct {
	Username     string
	PasswordHash string // argon2id PHC string; empty for SourceOIDC
	Roles        []string
	Source       string
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
	LastLoginAt  *time.Time
	// Profile fields, each optional (blank) and erasable by the person.
	DisplayName string
	Email       string
	Phone       string
}

// ActiveOwner reports whether u counts as an Account Owner: role admin and
// not locked.
func (u User) ActiveOwner() bool {
	return !u.Disabled && slices.Contains(u.Roles, authz.RoleAdmin)
}

// RefreshToken is a stored refresh token (never its plain form).
type RefreshToken struct {
	Hash      [sha256.Size]byte
	FamilyID  string
	Username  string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
	RevokedAt *time.Time
}

// UserChange is a partial update; nil fields are left alone.
type UserChange struct {
	Roles    *[]string
	Disabled *bool
	Profile
}

// Profile is a partial change of a person's profile; nil fields are left
// alone and a blank one erases the field.
type Profile struct {
	DisplayName *string
	Email       *string
	Phone       *string
}

// empty reports whether p changes nothing.
func (p Profile) empty() bool { return p.DisplayName == nil && p.Email == nil && p.Phone == nil }

// Normalize trims p's fields and checks them: a display name of at most 128
// characters without control characters, an e-mail address of at most 254
// bytes with one '@', a phone number of at most 32 characters of digits,
// spaces and "+()-.". It returns the names of the fields given, for the
// audit trail (which never holds their values). The error wraps ErrInvalid
// and never echoes the value.
func (p *Profile) Normalize() ([]string, error) {
	var changed []string
	if p.DisplayName != nil {
		v := strings.TrimSpace(*p.DisplayName)
		if len([]rune(v)) > MaxDisplayNameLen || strings.IndexFunc(v, unicode.IsControl) >= 0 || !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: display name must have at most %d characters and no control characters", ErrInvalid, MaxDisplayNameLen)
		}
		p.DisplayName, changed = &v, append(changed, "display_name")
	}
	if p.Email != nil {
		v := strings.TrimSpace(*p.Email)
		at := strings.Index(v, "@")
		if v != "" && (len(v) > MaxEmailLen || at < 1 || at != strings.LastIndex(v, "@") || at == len(v)-1 ||
			strings.IndexFunc(v, func(r rune) bool {
				return unicode.IsSpace(r) || unicode.IsControl(r) || r == '<' || r == '>' || r == '"'
			}) >= 0) {
			return nil, fmt.Errorf("%w: email must be an address like name@example.com (at most %d characters)", ErrInvalid, MaxEmailLen)
		}
		p.Email, changed = &v, append(changed, "email")
	}
	if p.Phone != nil {
		v := strings.TrimSpace(*p.Phone)
		digits := 0
		for _, r := range v {
			if '0' <= r && r <= '9' {
				digits++
			} else if !strings.ContainsRune(" +()-.", r) {
				digits = -1000
			}
		}
		if v != "" && (len(v) > MaxPhoneLen || digits < 3) {
			return nil, fmt.Errorf("%w: phone must be digits, spaces and + ( ) - . (at most %d characters)", ErrInvalid, MaxPhoneLen)
		}
		p.Phone, changed = &v, append(changed, "phone")
	}
	return changed, nil
}

// OIDCState is a pending OIDC sign-in.
type OIDCState struct {
	StateHash [sha256.Size]byte
	Verifier  string
	Nonce     string
	ExpiresAt time.Time
}

// Confirm runs inside a store transaction after the change and before the
// commit; when it fails the change is rolled back. The service uses it to
// make a change and its audit record one.
type Confirm func(ctx context.Context) error

// Store keeps people, refresh tokens, sign-in failures and OIDC states.
type Store interface {
	// CreateUser inserts u. Returns ErrConflict when the username is taken.
	CreateUser(ctx context.Context, u User, confirm Confirm) error
	// GetUser returns the person with username, or ErrNotFound.
	GetUser(ctx context.Context, username string) (User, error)
	// ListUsers returns every person, by username.
	ListUsers(ctx context.Context) ([]User, error)
	// UpdateUser applies ch to username and returns the person afterwards;
	// disabling revokes their refresh tokens. Returns ErrNotFound.
	UpdateUser(ctx context.Context, username string, ch UserChange, at time.Time, confirm Confirm) (User, error)
	// SetPassword replaces the password hash and revokes the person's refresh
	// tokens. Returns ErrNotFound.
	SetPassword(ctx context.Context, username, hash string, at time.Time, confirm Confirm) error
	// DeleteUser removes the person and their refresh tokens. Returns
	// ErrNotFound.
	DeleteUser(ctx context.Context, username string, confirm Confirm) error
	// UpsertOIDCUser finds the OIDC person with key (SHA-256 of issuer, NUL,
	// subject) and sets their roles; an unknown key is stored as a new
	// person named username (bound to a person stored before people were
	// keyed, of that name). Empty roles also revoke the person's sessions;
	// for an unknown key they store nothing and give ErrNotFound. The last
	// active Account Owner keeps role admin when roles lack it (checked in
	// the transaction, as for UpdateUser): the returned person's roles then
	// hold admin beside roles.
	// ErrForbidden: username is a local person's or another OIDC person's.
	UpsertOIDCUser(ctx context.Context, key [sha256.Size]byte, username string, roles []string, at time.Time) (User, error)
	// TouchLogin sets last_login_at.
	TouchLogin(ctx context.Context, username string, at time.Time) error

	// CreateRefresh stores a refresh token.
	CreateRefresh(ctx context.Context, t RefreshToken) error
	// RotateRefresh marks the token with hash old used and stores next in
	// its family, atomically, and returns the old token as stored. An
	// unknown, expired or revoked token gives ErrBadCredentials. A token
	// used more than grace ago gives ErrBadCredentials and revokes its
	// whole family (reuse means theft); one used within grace (two page
	// loads that raced with the same token) gets next as a sibling. It
	// returns next's expiry as stored: an OIDC person's tokens never
	// outlive the first of their family (their sign-in does not slide).
	RotateRefresh(ctx context.Context, old [sha256.Size]byte, next RefreshToken, at time.Time, grace time.Duration) (RefreshToken, time.Time, error)
	// RevokeRefreshFamily revokes the family of the token with hash and
	// returns its username; ErrBadCredentials when unknown.
	RevokeRefreshFamily(ctx context.Context, hash [sha256.Size]byte, at time.Time) (string, error)

	// CountAttempt counts one sign-in attempt for each key, opening a new
	// window for keys whose window has closed, and returns each key's window
	// afterwards. Counting before the password is checked makes the limit
	// hold against parallel guesses too.
	CountAttempt(ctx context.Context, keys []string, window time.Duration, now time.Time) (map[string]Window, error)
	// Forgive takes one attempt back from each key (a successful sign-in
	// from an address does not count against it).
	Forgive(ctx context.Context, keys []string) error
	// ResetFailures forgets the attempts of keys.
	ResetFailures(ctx context.Context, keys []string) error

	// SaveOIDCState stores a pending OIDC sign-in.
	SaveOIDCState(ctx context.Context, s OIDCState) error
	// TakeOIDCState returns and deletes the unexpired state with hash;
	// ErrBadCredentials when there is none.
	TakeOIDCState(ctx context.Context, hash [sha256.Size]byte, now time.Time) (OIDCState, error)

	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
}

// Window is the attempt count of one throttling key in its current window.
type Window struct {
	Start    time.Time
	Attempts int
}

// Auditor records an audited action durably. Audit returns an error wrapping
// ErrAuditUnavailable when the record is not known to be durable.
type Auditor interface {
	Audit(ctx context.Context, rec wire.AuditRecord) error
}

// Meta describes the request behind an action, for the audit record and
// throttling.
type Meta struct {
	Actor string // the caller's authz.Caller.Actor(); blank for sign-ins
	// NotOwner is true when the caller manages people without holding role
	// admin (a User Administrator): they may not create, change, lock,
	// reset or delete an Account Owner, nor make someone one. The zero
	// value (an owner, the admin key, the service itself) is unrestricted.
	NotOwner  bool
	ClientIP  string // for throttling only; stored as a digest
	ClientNet string // the address's /24 or /48, for the audit trail
	UserAgent string
	RequestID string
}

// Limits on fields.
const (
	MaxUsernameLen = 64
	MinPasswordLen = 12
	// MaxPasswordLen bounds the work an attacker can make argon2 do.
	MaxPasswordLen = 256
	// Profile field limits (the database columns' widths).
	MaxDisplayNameLen = 128
	MaxEmailLen       = 254
	MaxPhoneLen       = 32
)

// reservedActor is the actor audited for the admin key; no person may take it.
const reservedActor = authz.ActorAdminKey

// NormalizeUsername lower-cases a username and checks it: 1 to 64
// characters of [a-z0-9._@-], starting with a letter or digit. The error
// wraps ErrInvalid.
func NormalizeUsername(s string) (string, error) {
	s = strings.ToLower(s)
	if s == "" {
		return "", fmt.Errorf("%w: username is required", ErrInvalid)
	}
	if len(s) > MaxUsernameLen {
		return "", fmt.Errorf("%w: username is longer than %d characters", ErrInvalid, MaxUsernameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '@' || c == '-')
		if !ok {
			return "", fmt.Errorf("%w: username may contain only letters, digits, '.', '_', '@' and '-', and starts with a letter or digit", ErrInvalid)
		}
	}
	if s == reservedActor {
		return "", fmt.Errorf("%w: username %q is reserved", ErrInvalid, s)
	}
	return s, nil
}

// ValidatePassword checks a new password's length (12 to 256 characters).
// The error wraps ErrInvalid and never contains the password.
func ValidatePassword(p string) error {
	n := len([]rune(p))
	if n < MinPasswordLen {
		return fmt.Errorf("%w: password must have at least %d characters", ErrInvalid, MinPasswordLen)
	}
	if len(p) > MaxPasswordLen {
		return fmt.Errorf("%w: password must have at most %d bytes", ErrInvalid, MaxPasswordLen)
	}
	return nil
}

// NormalizeRoles checks roles against authz.Roles and returns them sorted
// without duplicates. The error wraps ErrInvalid.
func NormalizeRoles(roles []string) ([]string, error) {
	out := make([]string, 0, len(roles))
	for _, r := range roles {
		if !authz.ValidRole(r) {
			// The value is not echoed: a password pasted into the wrong
			// field must not come back.
			return nil, fmt.Errorf("%w: unknown role (want %s)", ErrInvalid, strings.Join(authz.Roles, ", "))
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RefreshPrefix starts every refresh token so secret scanners recognise one.
const RefreshPrefix = "tvr_"

// NewRefreshPlain returns a fresh refresh token (prefix and 32 random bytes
// in base64url) and its SHA-256.
func NewRefreshPlain() (string, [sha256.Size]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [sha256.Size]byte{}, fmt.Errorf("read random bytes: %w", err)
	}
	plain := RefreshPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return plain, sha256.Sum256([]byte(plain)), nil
}
