package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"threatview/platform/authz"
	"threatview/platform/wire"
)

// Audit actions recorded by the service.
const (
	ActionLogin          = "identity.login"
	ActionLoginFailed    = "identity.login_failed"
	ActionLogout         = "identity.logout"
	ActionUserCreate     = "identity.user_create"
	ActionUserUpdate     = "identity.user_update"
	ActionUserDelete     = "identity.user_delete"
	ActionPasswordChange = "identity.password_change"
	ActionProfileUpdate  = "identity.profile_update"
	ActionRescue         = "identity.owner_rescue"
	// ActionOwnerKept: a sign-in through the identity provider would have
	// taken role admin from the last active Account Owner; they kept it.
	ActionOwnerKept = "identity.owner_kept"
)

// ActorBootstrap is the actor of the first admin's creation at start.
const ActorBootstrap = "identity-bootstrap"

// ActorRescue is the actor of a locked-out owner's rescue at start
// (IDENTITY_RESCUE_OWNER).
const ActorRescue = "identity-rescue"

// MaxAccessTTL caps the access token lifetime: it bounds how long a disabled
// person's access token keeps working (services verify tokens locally, and
// accept an expired one for authz.MaxLeeway more), so that a disabled
// person is locked out of every service within 5 minutes.
const MaxAccessTTL = 5*time.Minute - authz.MaxLeeway

// Options are the service's lifetimes and throttling limits.
type Options struct {
	// AccessTTL is the access token lifetime (at most MaxAccessTTL).
	AccessTTL time.Duration
	// RefreshTTL is the refresh token lifetime.
	RefreshTTL time.Duration
	// OIDCSessionTTL bounds a sign-in through the identity provider: its
	// refresh tokens do not slide past it, so a person removed at the
	// provider loses access within it (plus one access token's lifetime).
	OIDCSessionTTL time.Duration
	// RefreshGrace is how long after its use a refresh token may be
	// presented again (two page loads at once) and get a sibling instead
	// of ending the sign-in as stolen. 0 means none.
	RefreshGrace time.Duration
	// MaxFailuresUser and MaxFailuresIP are the failed sign-ins allowed per
	// username and per client address within FailureWindow; beyond them
	// sign-ins are refused with ErrThrottled until the window closes.
	MaxFailuresUser int
	MaxFailuresIP   int
	FailureWindow   time.Duration
}

// Session is what a successful sign-in or refresh returns.
type Session struct {
	AccessToken      string
	ExpiresAt        time.Time
	RefreshToken     string
	RefreshExpiresAt time.Time
	User             User
}

// NewUser is what an admin asks for.
type NewUser struct {
	Username    string
	Password    string
	Roles       []string
	DisplayName string
}

// Service implements sign-in, sessions and user management on a Store.
//
// Auditing (when an Auditor is given): user changes and successful sign-ins
// are confirmed by the audit logger before they take effect (a change is
// committed only after its record is durable; a session is issued only after
// its sign-in is recorded), so with the audit logger down they fail with
// ErrAuditUnavailable. Failed sign-ins and logouts are audited on a best
// effort basis: a refusal or a revocation must not wait for the audit logger.
type Service struct {
	store  Store
	hasher *Hasher
	keys   *Keyring
	audit  Auditor
	opts   Options
	log    *slog.Logger
	now    func() time.Time
}

// NewService returns a Service. audit may be nil (auditing off).
func NewService(store Store, hasher *Hasher, keys *Keyring, audit Auditor, opts Options, log *slog.Logger) *Service {
	if opts.AccessTTL <= 0 || opts.AccessTTL > MaxAccessTTL {
		opts.AccessTTL = MaxAccessTTL
	}
	if opts.RefreshTTL <= 0 {
		opts.RefreshTTL = 12 * time.Hour
	}
	if opts.OIDCSessionTTL <= 0 || opts.OIDCSessionTTL > opts.RefreshTTL {
		opts.OIDCSessionTTL = min(time.Hour, opts.RefreshTTL)
	}
	if opts.FailureWindow <= 0 {
		opts.FailureWindow = 15 * time.Minute
	}
	if opts.MaxFailuresUser <= 0 {
		opts.MaxFailuresUser = 5
	}
	if opts.MaxFailuresIP <= 0 {
		opts.MaxFailuresIP = 20
	}
	return &Service{store: store, hasher: hasher, keys: keys, audit: audit, opts: opts, log: log,
		now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// Keys returns the signing keyring (for the JWK set and local verification).
func (s *Service) Keys() *Keyring { return s.keys }

// throttleKeys are the failure counters a sign-in attempt touches.
func throttleKeys(username, ip string) []string {
	if len(username) > MaxUsernameLen {
		username = username[:MaxUsernameLen]
	}
	keys := []string{"user:" + username}
	if ip != "" {
		// The store keeps a digest, not the address (no full address at rest).
		sum := sha256.Sum256([]byte("throttle:" + ip))
		keys = append(keys, "ip:"+hex.EncodeToString(sum[:16]))
	}
	return keys
}

// countAttempt counts a sign-in attempt for keys and returns a
// *ThrottledError when one of them is over its limit.
func (s *Service) countAttempt(ctx context.Context, keys []string, now time.Time) error {
	wins, err := s.store.CountAttempt(ctx, keys, s.opts.FailureWindow, now)
	if err != nil {
		return err
	}
	var wait time.Duration
	for k, w := range wins {
		limit := s.opts.MaxFailuresUser
		if strings.HasPrefix(k, "ip:") {
			limit = s.opts.MaxFailuresIP
		}
		if w.Attempts > limit {
			wait = max(wait, w.Start.Add(s.opts.FailureWindow).Sub(now))
		}
	}
	if wait > 0 {
		return &ThrottledError{RetryAfter: max(time.Second, time.Duration(math.Ceil(wait.Seconds()))*time.Second)}
	}
	return nil
}

// succeeded clears the username's count and takes the attempt back from the
// address.
func (s *Service) succeeded(ctx context.Context, keys []string) error {
	if err := s.store.ResetFailures(ctx, keys[:1]); err != nil {
		return err
	}
	return s.store.Forgive(ctx, keys[1:])
}

// Login checks a username and password and opens a session. Errors:
// ErrBadCredentials (whatever was wrong), ErrThrottled (a *ThrottledError),
// ErrAuditUnavailable.
func (s *Service) Login(ctx context.Context, username, password string, meta Meta) (Session, error) {
	now := s.now()
	name, nameErr := NormalizeUsername(username)
	if nameErr != nil {
		name = username
	}
	keys := throttleKeys(name, meta.ClientIP)
	if err := s.countAttempt(ctx, keys, now); err != nil {
		if errors.Is(err, ErrThrottled) {
			s.auditBestEffort(ctx, s.record(ActionLoginFailed, "", s.knownSubject(ctx, name, nameErr), 429, meta, map[string]any{"reason": "throttled"}))
		}
		return Session{}, err
	}
	var u User
	if nameErr == nil && len(password) <= MaxPasswordLen {
		var err error
		u, err = s.store.GetUser(ctx, name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Session{}, err
		}
	}
	// Verify even for an unknown user (against a dummy hash), so the answer
	// takes as long as for a wrong password.
	pw := password
	if len(pw) > MaxPasswordLen {
		pw = ""
	}
	ok, err := s.hasher.Verify(ctx, u.PasswordHash, pw)
	if err != nil {
		return Session{}, err
	}
	if !ok || u.Disabled || u.Source != SourceLocal || len(password) > MaxPasswordLen {
		subject := unknownSubject
		if u.Username != "" {
			subject = u.Username
		}
		s.auditBestEffort(ctx, s.record(ActionLoginFailed, "", subject, 401, meta, nil))
		return Session{}, ErrBadCredentials
	}
	if err := s.succeeded(ctx, keys); err != nil {
		return Session{}, err
	}
	return s.open(ctx, u, meta, "password")
}

// unknownSubject stands in the audit trail for a username that names no
// person: what was typed may be a password typed into the wrong field, so it
// is never recorded (nor logged).
const unknownSubject = "(unknown)"

// knownSubject is name when it names a person, else unknownSubject.
func (s *Service) knownSubject(ctx context.Context, name string, nameErr error) string {
	if nameErr != nil {
		return unknownSubject
	}
	if _, err := s.store.GetUser(ctx, name); err != nil {
		return unknownSubject
	}
	return name
}

// open records a sign-in and issues a session for u.
func (s *Service) open(ctx context.Context, u User, meta Meta, method string) (Session, error) {
	now := s.now()
	meta.Actor = u.Username
	if s.audit != nil {
		if err := s.audit.Audit(ctx, s.record(ActionLogin, u.Username, u.Username, 200, meta, map[string]any{"method": method, "roles": u.Roles})); err != nil {
			return Session{}, fmt.Errorf("audit sign-in of %s: %w", u.Username, err)
		}
	}
	if err := s.store.TouchLogin(ctx, u.Username, now); err != nil {
		return Session{}, err
	}
	u.LastLoginAt = &now
	ttl := s.opts.RefreshTTL
	if method == "oidc" {
		ttl = s.opts.OIDCSessionTTL
	}
	return s.issue(ctx, u, uuid.NewString(), now, ttl)
}

// issue creates a refresh token in family, valid for ttl, and an access
// token for u.
func (s *Service) issue(ctx context.Context, u User, family string, now time.Time, ttl time.Duration) (Session, error) {
	plain, hash, err := NewRefreshPlain()
	if err != nil {
		return Session{}, err
	}
	rt := RefreshToken{Hash: hash, FamilyID: family, Username: u.Username, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.store.CreateRefresh(ctx, rt); err != nil {
		return Session{}, err
	}
	return s.session(u, plain, rt.ExpiresAt, now)
}

func (s *Service) session(u User, refresh string, refreshExp, now time.Time) (Session, error) {
	access, err := s.keys.Sign(u, now, s.opts.AccessTTL, uuid.NewString())
	if err != nil {
		return Session{}, err
	}
	return Session{AccessToken: access, ExpiresAt: now.Add(s.opts.AccessTTL), RefreshToken: refresh, RefreshExpiresAt: refreshExp, User: u}, nil
}

// Refresh trades a refresh token for a new session (the old token is used
// up). Errors: ErrBadCredentials for an unknown, expired, revoked or reused
// token or a disabled person.
func (s *Service) Refresh(ctx context.Context, plain string) (Session, error) {
	now := s.now()
	if len(plain) != len(RefreshPrefix)+43 || !strings.HasPrefix(plain, RefreshPrefix) {
		return Session{}, ErrBadCredentials
	}
	nextPlain, nextHash, err := NewRefreshPlain()
	if err != nil {
		return Session{}, err
	}
	next := RefreshToken{Hash: nextHash, CreatedAt: now, ExpiresAt: now.Add(s.opts.RefreshTTL)}
	old, nextExp, err := s.store.RotateRefresh(ctx, sha256.Sum256([]byte(plain)), next, now, s.opts.RefreshGrace)
	if err != nil {
		return Session{}, err
	}
	next.ExpiresAt = nextExp
	u, err := s.store.GetUser(ctx, old.Username)
	if errors.Is(err, ErrNotFound) || err == nil && u.Disabled {
		_, _ = s.store.RevokeRefreshFamily(ctx, nextHash, now)
		return Session{}, ErrBadCredentials
	}
	if err != nil {
		return Session{}, err
	}
	return s.session(u, nextPlain, next.ExpiresAt, now)
}

// Logout revokes the refresh token's family (every token rotated from the
// same sign-in). The access token lives on until it expires (at most
// MaxAccessTTL). Errors: ErrBadCredentials for an unknown token.
func (s *Service) Logout(ctx context.Context, plain string, meta Meta) error {
	now := s.now()
	if len(plain) > 128 {
		return ErrBadCredentials
	}
	username, err := s.store.RevokeRefreshFamily(ctx, sha256.Sum256([]byte(plain)), now)
	if err != nil {
		return err
	}
	meta.Actor = username
	s.auditBestEffort(ctx, s.record(ActionLogout, username, username, 204, meta, nil))
	return nil
}

// GetUser returns the person with username. Errors: ErrInvalid, ErrNotFound.
func (s *Service) GetUser(ctx context.Context, username string) (User, error) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, err
	}
	return s.store.GetUser(ctx, name)
}

// ListUsers returns every person.
func (s *Service) ListUsers(ctx context.Context) ([]User, error) { return s.store.ListUsers(ctx) }

// CreateUser adds a local person. Errors: ErrInvalid, ErrConflict,
// ErrAuditUnavailable.
func (s *Service) CreateUser(ctx context.Context, nu NewUser, meta Meta) (User, error) {
	name, err := NormalizeUsername(nu.Username)
	if err != nil {
		return User{}, err
	}
	roles, err := NormalizeRoles(nu.Roles)
	if err != nil {
		return User{}, err
	}
	if meta.NotOwner && slices.Contains(roles, authz.RoleAdmin) {
		return User{}, errOwnersOnly
	}
	prof := Profile{DisplayName: &nu.DisplayName}
	if _, err := prof.Normalize(); err != nil {
		return User{}, err
	}
	if err := ValidatePassword(nu.Password); err != nil {
		return User{}, err
	}
	hash, err := s.hasher.Hash(ctx, nu.Password)
	if err != nil {
		return User{}, err
	}
	now := s.now()
	u := User{Username: name, PasswordHash: hash, Roles: roles, Source: SourceLocal, CreatedAt: now, UpdatedAt: now, DisplayName: *prof.DisplayName}
	confirm := s.confirm(s.record(ActionUserCreate, meta.Actor, name, 201, meta, map[string]any{"roles": roles}))
	if err := s.store.CreateUser(ctx, u, confirm); err != nil {
		return User{}, fmt.Errorf("create user %s: %w", name, err)
	}
	return u, nil
}

// errOwnersOnly refuses a User Administrator's change to an Account Owner.
var errOwnersOnly = fmt.Errorf("%w: only an Account Owner may create, change, lock, reset or delete an Account Owner", ErrForbidden)

// guardOwner refuses a caller who is no owner acting on an owner.
func (s *Service) guardOwner(ctx context.Context, name string, meta Meta) error {
	if !meta.NotOwner {
		return nil
	}
	u, err := s.store.GetUser(ctx, name)
	if err != nil {
		return err
	}
	if slices.Contains(u.Roles, authz.RoleAdmin) {
		return errOwnersOnly
	}
	return nil
}

// UpdateUser changes a person's roles, locked flag or profile. An owner
// cannot lock or demote themselves, and the last active owner cannot be
// locked or demoted by anyone (ErrLastOwner, checked in the store's
// transaction). A caller who is no owner cannot touch an owner or make one
// (ErrForbidden). Errors: ErrInvalid, ErrNotFound, ErrConflict,
// ErrForbidden, ErrAuditUnavailable.
func (s *Service) UpdateUser(ctx context.Context, username string, ch UserChange, meta Meta) (User, error) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, err
	}
	if ch.Roles == nil && ch.Disabled == nil && ch.Profile.empty() {
		return User{}, fmt.Errorf("%w: nothing to change (give roles, disabled or a profile field)", ErrInvalid)
	}
	detail := map[string]any{}
	if ch.Roles != nil {
		roles, err := NormalizeRoles(*ch.Roles)
		if err != nil {
			return User{}, err
		}
		ch.Roles = &roles
		detail["roles"] = roles
		if meta.NotOwner && slices.Contains(roles, authz.RoleAdmin) {
			return User{}, errOwnersOnly
		}
		if name == meta.Actor && !meta.NotOwner && !slices.Contains(roles, authz.RoleAdmin) {
			return User{}, fmt.Errorf("%w: you cannot remove your own Account Owner role", ErrConflict)
		}
	}
	if ch.Disabled != nil {
		detail["disabled"] = *ch.Disabled
		if name == meta.Actor && *ch.Disabled {
			return User{}, fmt.Errorf("%w: you cannot lock yourself", ErrConflict)
		}
	}
	changed, err := ch.Profile.Normalize()
	if err != nil {
		return User{}, err
	}
	if len(changed) > 0 {
		detail["profile"] = changed // names only: the values are personal data
	}
	if err := s.guardOwner(ctx, name, meta); err != nil {
		return User{}, err
	}
	u, err := s.store.UpdateUser(ctx, name, ch, s.now(), s.confirm(s.record(ActionUserUpdate, meta.Actor, name, 200, meta, detail)))
	if err != nil {
		return User{}, fmt.Errorf("update user %s: %w", name, err)
	}
	return u, nil
}

// UpdateProfile changes the caller's own display name, e-mail address or
// phone number; a blank value erases the field. Each change is audited with
// the names of the fields changed, never their values. Errors: ErrInvalid,
// ErrNotFound, ErrAuditUnavailable.
func (s *Service) UpdateProfile(ctx context.Context, username string, p Profile, meta Meta) (User, error) {
	changed, err := p.Normalize()
	if err != nil {
		return User{}, err
	}
	if len(changed) == 0 {
		return User{}, fmt.Errorf("%w: nothing to change (give display_name, email or phone)", ErrInvalid)
	}
	meta.Actor = username
	rec := s.record(ActionProfileUpdate, username, username, 200, meta, map[string]any{"changed": changed})
	u, err := s.store.UpdateUser(ctx, username, UserChange{Profile: p}, s.now(), s.confirm(rec))
	if err != nil {
		return User{}, fmt.Errorf("update profile of %s: %w", username, err)
	}
	return u, nil
}

// DeleteUser removes a person. Errors: ErrInvalid, ErrNotFound, ErrConflict
// (yourself), ErrAuditUnavailable.
func (s *Service) DeleteUser(ctx context.Context, username string, meta Meta) error {
	name, err := NormalizeUsername(username)
	if err != nil {
		return err
	}
	if name == meta.Actor {
		return fmt.Errorf("%w: you cannot delete yourself", ErrConflict)
	}
	if err := s.guardOwner(ctx, name, meta); err != nil {
		return err
	}
	if err := s.store.DeleteUser(ctx, name, s.confirm(s.record(ActionUserDelete, meta.Actor, name, 204, meta, nil))); err != nil {
		return fmt.Errorf("delete user %s: %w", name, err)
	}
	return nil
}

// SetPassword sets a local person's password (an admin's reset) and ends
// their sessions. Errors: ErrInvalid, ErrNotFound, ErrAuditUnavailable.
func (s *Service) SetPassword(ctx context.Context, username, password string, meta Meta) error {
	name, err := NormalizeUsername(username)
	if err != nil {
		return err
	}
	if err := ValidatePassword(password); err != nil {
		return err
	}
	u, err := s.store.GetUser(ctx, name)
	if err != nil {
		return err
	}
	if u.Source != SourceLocal {
		return fmt.Errorf("%w: %s signs in through the identity provider and has no password here", ErrInvalid, name)
	}
	if meta.NotOwner && slices.Contains(u.Roles, authz.RoleAdmin) {
		return errOwnersOnly
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return err
	}
	return s.store.SetPassword(ctx, name, hash, s.now(), s.confirm(s.record(ActionPasswordChange, meta.Actor, name, 204, meta, nil)))
}

// ChangePassword changes the caller's own password after checking the
// current one (a wrong one counts as a failed sign-in). Errors:
// ErrBadCredentials, ErrThrottled, ErrInvalid, ErrAuditUnavailable.
func (s *Service) ChangePassword(ctx context.Context, username, current, next string, meta Meta) error {
	if err := ValidatePassword(next); err != nil {
		return err
	}
	now := s.now()
	keys := throttleKeys(username, meta.ClientIP)
	if err := s.countAttempt(ctx, keys, now); err != nil {
		return err
	}
	u, err := s.store.GetUser(ctx, username)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	ok, err := s.hasher.Verify(ctx, u.PasswordHash, current)
	if err != nil {
		return err
	}
	if !ok || u.Disabled || u.Source != SourceLocal {
		return ErrBadCredentials
	}
	if err := s.succeeded(ctx, keys); err != nil {
		return err
	}
	hash, err := s.hasher.Hash(ctx, next)
	if err != nil {
		return err
	}
	meta.Actor = username
	return s.store.SetPassword(ctx, username, hash, now, s.confirm(s.record(ActionPasswordChange, username, username, 204, meta, nil)))
}

// OIDCPerson is who the identity provider vouched for.
type OIDCPerson struct {
	Issuer, Subject string // the provider's stable name for the person
	Username        string // shown, and the name of a new person
	Roles           []string
}

// oidcKey is how an OIDC person is stored: the issuer and subject, never
// the username the provider shows.
func oidcKey(p OIDCPerson) [sha256.Size]byte {
	return sha256.Sum256([]byte(p.Issuer + "\x00" + p.Subject))
}

// SignInOIDC opens a session for a person the identity provider vouched for,
// with roles mapped from their groups. The person is found by issuer and
// subject; their roles are replaced by the provider's at every sign-in, and
// a sign-in with no role also ends the person's sessions. The last active
// Account Owner is never demoted this way: they keep role admin beside the
// provider's roles, and ActionOwnerKept records it. Errors:
// ErrForbidden (no role, or the username is a local person's or another
// provider person's), ErrBadCredentials (disabled), ErrAuditUnavailable.
func (s *Service) SignInOIDC(ctx context.Context, p OIDCPerson, meta Meta) (Session, error) {
	if p.Issuer == "" || p.Subject == "" {
		return Session{}, fmt.Errorf("%w: the identity provider named no issuer or subject", ErrForbidden)
	}
	name, err := NormalizeUsername(p.Username)
	if err != nil {
		return Session{}, fmt.Errorf("%w: the identity provider's username: %v", ErrForbidden, err)
	}
	roles, err := NormalizeRoles(p.Roles)
	if err != nil {
		return Session{}, err
	}
	u, err := s.store.UpsertOIDCUser(ctx, oidcKey(p), name, roles, s.now())
	if err == nil && len(u.Roles) == 0 || errors.Is(err, ErrNotFound) && len(roles) == 0 {
		subject, detail := unknownSubject, map[string]any{"method": "oidc", "reason": "no role"}
		if err == nil {
			subject, detail["sessions_ended"] = u.Username, true
		}
		s.auditBestEffort(ctx, s.record(ActionLoginFailed, "", subject, 403, meta, detail))
		return Session{}, fmt.Errorf("%w: none of your groups grants a Threat View role", ErrForbidden)
	}
	if err != nil {
		return Session{}, err
	}
	if u.Disabled {
		s.auditBestEffort(ctx, s.record(ActionLoginFailed, "", u.Username, 401, meta, map[string]any{"method": "oidc"}))
		return Session{}, ErrBadCredentials
	}
	if slices.Contains(u.Roles, authz.RoleAdmin) && !slices.Contains(roles, authz.RoleAdmin) && s.audit != nil {
		// Confirmed like the sign-in itself: no session the trail cannot
		// explain.
		rec := s.record(ActionOwnerKept, u.Username, u.Username, 200, meta, map[string]any{
			"method": "oidc", "provider_roles": roles, "roles": u.Roles,
			"reason": "the last active Account Owner keeps the role; make another person owner first"})
		if err := s.audit.Audit(ctx, rec); err != nil {
			return Session{}, fmt.Errorf("audit owner kept for %s: %w", u.Username, err)
		}
	}
	return s.open(ctx, u, meta, "oidc")
}

// Bootstrap creates the first admin when no person of that name exists; it
// never changes an existing one. It reports whether it created the person.
func (s *Service) Bootstrap(ctx context.Context, username, password string) (bool, error) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return false, err
	}
	if _, err := s.store.GetUser(ctx, name); err == nil {
		return false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return false, err
	}
	_, err = s.CreateUser(ctx, NewUser{Username: name, Password: password, Roles: []string{authz.RoleAdmin}}, Meta{Actor: ActorBootstrap})
	if errors.Is(err, ErrConflict) {
		return false, nil // another replica was first
	}
	return err == nil, err
}

// Rescue gives a locked-out organisation its owner back: the local person
// username is created if missing, unlocked, made an Account Owner (other
// roles kept) and given password, which also ends their sessions. It is
// what IDENTITY_RESCUE_OWNER does at start, for whoever runs the service
// (docs: services/identity/README.md, "Rescue"); audited as ActorRescue.
// Errors: ErrInvalid (bad name or password, or an OIDC person),
// ErrAuditUnavailable.
func (s *Service) Rescue(ctx context.Context, username, password string) error {
	name, err := NormalizeUsername(username)
	if err != nil {
		return err
	}
	if err := ValidatePassword(password); err != nil {
		return err
	}
	meta := Meta{Actor: ActorRescue}
	u, err := s.store.GetUser(ctx, name)
	if errors.Is(err, ErrNotFound) {
		_, err = s.CreateUser(ctx, NewUser{Username: name, Password: password, Roles: []string{authz.RoleAdmin}}, meta)
		return err
	}
	if err != nil {
		return err
	}
	if u.Source != SourceLocal {
		return fmt.Errorf("%w: %s signs in through the identity provider; rescue a local person", ErrInvalid, name)
	}
	roles := append(slices.Clone(u.Roles), authz.RoleAdmin)
	roles, _ = NormalizeRoles(roles)
	unlocked := false
	rec := s.record(ActionRescue, ActorRescue, name, 200, meta, map[string]any{"roles": roles, "disabled": false})
	if _, err := s.store.UpdateUser(ctx, name, UserChange{Roles: &roles, Disabled: &unlocked}, s.now(), s.confirm(rec)); err != nil {
		return fmt.Errorf("rescue %s: %w", name, err)
	}
	return s.SetPassword(ctx, name, password, meta)
}

func (s *Service) confirm(rec wire.AuditRecord) Confirm {
	if s.audit == nil {
		return nil
	}
	return func(ctx context.Context) error { return s.audit.Audit(ctx, rec) }
}

func (s *Service) auditBestEffort(ctx context.Context, rec wire.AuditRecord) {
	if s.audit == nil {
		return
	}
	if err := s.audit.Audit(ctx, rec); err != nil {
		s.log.Warn("audit record lost", "action", rec.Action, "err", err)
	}
}

// record builds an audit record. actor is the person acting; the subject
// goes in the resource. detail must never hold a secret.
func (s *Service) record(action, actor, subject string, outcome int, meta Meta, detail map[string]any) wire.AuditRecord {
	if actor == "" {
		actor = meta.Actor
	}
	if len(subject) > MaxUsernameLen {
		subject = subject[:MaxUsernameLen]
	}
	subject = strings.ToValidUTF8(subject, "?")
	var body []byte
	if detail != nil {
		body, _ = json.Marshal(detail)
	}
	return wire.AuditRecord{
		ID:         uuid.NewString(),
		Time:       s.now(),
		ActorToken: actor,
		Action:     action,
		Resource:   "user:" + subject,
		Outcome:    outcome,
		ClientIP:   meta.ClientNet,
		UserAgent:  meta.UserAgent,
		RequestID:  meta.RequestID,
		Body:       body,
	}
}
