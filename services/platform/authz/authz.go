// Package authz is the one role check every service puts in front of its
// people-facing endpoints.
//
// A caller presents "Authorization: Bearer <credential>", either an access
// token signed by the identity service (an EdDSA JWT, verified locally with
// the public keys the identity service publishes at /.well-known/jwks.json)
// or the admin key, which keeps working for automation and acts as role
// admin. The middleware puts the caller (username and roles) in the request
// context; audited actions name Caller.Actor: the person's username, or
// "admin-key".
//
// Answers: 401 with the JSON error when the credential is missing, unknown,
// tampered with or expired; 403 when it is valid but lacks every required
// role; 503 with Retry-After when the public keys were never fetched (the
// identity service unreachable since start). Role admin passes every check.
//
// Access tokens are not looked up at the identity service, so a disabled
// person's token keeps working until it expires: the identity service caps
// the access token lifetime at 5 minutes, which bounds that delay.
package authz

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"threatview/platform/httpserver"
)

// Roles a person can hold. The reference product names them Account Owner
// (admin), User Administrator (user_admin) and Insights Viewer (analyst).
const (
	// RoleAdmin may do everything.
	RoleAdmin = "admin"
	// RoleUserAdmin manages people (identity's /v1/users) and nothing else:
	// no dashboard, statistic, token, audit record or alert. Only the
	// identity service names it in a Require; every other service's check
	// refuses it.
	RoleUserAdmin = "user_admin"
	// RoleAnalyst reads statistics and dashboards.
	RoleAnalyst = "analyst"
	// RoleAuditor reads the audit trail.
	RoleAuditor = "auditor"
)

// Roles lists every role, in a stable order.
var Roles = []string{RoleAdmin, RoleUserAdmin, RoleAnalyst, RoleAuditor}

// RoleNames are the reference product's names for the roles, for people.
var RoleNames = map[string]string{
	RoleAdmin:     "Account Owner",
	RoleUserAdmin: "User Administrator",
	RoleAnalyst:   "Insights Viewer",
	RoleAuditor:   "Auditor",
}

// ValidRole reports whether r is one of Roles.
func ValidRole(r string) bool { return slices.Contains(Roles, r) }

// Issuer and Audience are the iss and aud of every access token the identity
// service signs; verifiers refuse tokens with others.
const (
	Issuer   = "threatview-identity"
	Audience = "threatview"
)

// ActorAdminKey is the actor audited for calls made with the admin key.
const ActorAdminKey = "admin-key"

// MaxLeeway is the clock skew tolerated on exp, nbf and iat.
const MaxLeeway = 10 * time.Second

// Errors returned by Verifier.Verify; both answer 401.
var (
	// ErrInvalidToken means the token is malformed, tampered with, expired,
	// signed by an unknown key or not meant for Threat View.
	ErrInvalidToken = errors.New("invalid access token")
	// ErrKeysUnavailable means the verification keys could not be fetched.
	ErrKeysUnavailable = errors.New("verification keys unavailable")
)

// Caller is who made a request.
type Caller struct {
	// Username is the person's username; empty for the admin key.
	Username string
	// Roles are the caller's roles (RoleAdmin for the admin key).
	Roles []string
	// AdminKey is true when the caller presented the admin key.
	AdminKey bool
}

// Actor is the name audit records carry for the caller.
func (c Caller) Actor() string {
	if c.AdminKey {
		return ActorAdminKey
	}
	return c.Username
}

// HasAny reports whether the caller holds one of roles; RoleAdmin holds all.
func (c Caller) HasAny(roles ...string) bool {
	for _, have := range c.Roles {
		if have == RoleAdmin || slices.Contains(roles, have) {
			return true
		}
	}
	return false
}

type ctxKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the caller the middleware put in ctx.
func FromContext(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(ctxKey{}).(Caller)
	return c, ok
}

// KeySource finds the public key with a key id. Key returns ErrInvalidToken
// (wrapped) for an unknown kid and ErrKeysUnavailable when it cannot tell.
type KeySource interface {
	Key(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// Claims are the claims of an access token.
type Claims struct {
	Roles []string `json:"roles"`
	jwt.RegisteredClaims
}

// Verifier checks access tokens against a KeySource.
type Verifier struct {
	keys KeySource
	now  func() time.Time
}

// NewVerifier returns a Verifier using keys.
func NewVerifier(keys KeySource) *Verifier {
	return &Verifier{keys: keys, now: time.Now}
}

// Verify checks token's signature, issuer, audience and times and returns
// its caller. Errors wrap ErrInvalidToken or ErrKeysUnavailable.
func (v *Verifier) Verify(ctx context.Context, token string) (Caller, error) {
	var claims Claims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, fmt.Errorf("%w: no kid", ErrInvalidToken)
		}
		return v.keys.Key(ctx, kid)
	},
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(MaxLeeway),
		jwt.WithTimeFunc(v.now),
	)
	if err != nil {
		if errors.Is(err, ErrKeysUnavailable) {
			return Caller{}, err
		}
		return Caller{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if claims.Subject == "" {
		return Caller{}, fmt.Errorf("%w: no subject", ErrInvalidToken)
	}
	roles := make([]string, 0, len(claims.Roles))
	for _, r := range claims.Roles {
		if ValidRole(r) {
			roles = append(roles, r)
		}
	}
	return Caller{Username: claims.Subject, Roles: roles}, nil
}

// Authenticator is the middleware factory: it accepts access tokens (when it
// has a Verifier) and the admin key (when one is set).
type Authenticator struct {
	verifier *Verifier
	adminKey string
	log      *slog.Logger
}

// New returns an Authenticator. v may be nil (access tokens refused: the
// identity service is not configured); adminKey may be blank (refused).
func New(v *Verifier, adminKey string, log *slog.Logger) *Authenticator {
	return &Authenticator{verifier: v, adminKey: adminKey, log: log}
}

// Authenticate returns the caller behind r's bearer credential. Errors wrap
// ErrInvalidToken (also for a missing credential) or ErrKeysUnavailable.
func (a *Authenticator) Authenticate(r *http.Request) (Caller, error) {
	cred := httpserver.BearerToken(r)
	if cred == "" {
		return Caller{}, fmt.Errorf("%w: no bearer credential", ErrInvalidToken)
	}
	// A JWT has two dots; the admin key (hex) has none. The admin key is
	// compared in constant time whatever the credential looks like.
	isKey := httpserver.KeyEqual(cred, a.adminKey)
	if isKey {
		return Caller{AdminKey: true, Roles: []string{RoleAdmin}}, nil
	}
	if a.verifier == nil || strings.Count(cred, ".") != 2 {
		return Caller{}, ErrInvalidToken
	}
	return a.verifier.Verify(r.Context(), cred)
}

// Require returns middleware that lets a request through only when its
// caller holds one of roles (RoleAdmin always passes; no roles at all means
// any authenticated caller), with the caller in the request context.
func (a *Authenticator) Require(roles ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := a.Authenticate(r)
			if errors.Is(err, ErrKeysUnavailable) {
				// The token may well be good: say so rather than 401, which
				// would send the person back to sign in.
				if a.log != nil {
					a.log.Warn("access token not verified", "err", err)
				}
				w.Header().Set("Retry-After", "5")
				httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "access tokens cannot be verified right now; retry later", nil)
				return
			}
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="threatview"`)
				httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid credentials", nil)
				return
			}
			if len(roles) > 0 && !c.HasAny(roles...) {
				httpserver.WriteError(w, http.StatusForbidden, "forbidden",
					"this action needs role "+strings.Join(roles, " or "), map[string]any{"roles": roles})
				return
			}
			next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
		})
	}
}

// Sign returns an access token for username with roles, valid for ttl from
// issuedAt, signed with priv (kid from KeyID). id becomes the jti claim.
func Sign(priv ed25519.PrivateKey, username string, roles []string, issuedAt time.Time, ttl time.Duration, id string) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, Claims{
		Roles: roles,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   username,
			Audience:  jwt.ClaimStrings{Audience},
			IssuedAt:  jwt.NewNumericDate(issuedAt),
			NotBefore: jwt.NewNumericDate(issuedAt),
			ExpiresAt: jwt.NewNumericDate(issuedAt.Add(ttl)),
			ID:        id,
		},
	})
	t.Header["kid"] = KeyID(priv.Public().(ed25519.PublicKey))
	s, err := t.SignedString(priv)
	if err != nil {
		return "", fmt.Errorf("sign access token: %w", err)
	}
	return s, nil
}
