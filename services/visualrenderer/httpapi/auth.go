package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/visualrenderer/identity"
)

// Auth is the one check in front of every stats, chart and dashboard
// route. A request passes with role analyst or admin, as either
//   - "Authorization: Bearer <credential>": the admin key (automation) or
//     an access token from the identity service, or
//   - the session cookie of a person who signed in with their username
//     and password: the sign-in form posts them to identity (POST
//     /v1/login) and keeps identity's answer in the cookie, the access
//     token (EdDSA, 5 minutes at most, verified here with identity's
//     public keys) and the refresh token. A page request renews the access
//     token through identity (POST /v1/refresh) when it has less than a
//     minute left, so the session lasts as long as identity's refresh token
//     and ends when identity revokes it (sign-out, a disabled person, a
//     changed password). When identity cannot be reached the access token
//     is used until it expires, then the pages answer 503: access fails
//     closed.
//
// The cookie is __Host- prefixed (Secure, path /, no domain), HttpOnly and
// SameSite=Lax, so following a link from another site keeps the person
// signed in while cross-site forms carry no session; every form also has a
// CSRF token. Nobody types the admin key into a page.
type Auth struct {
	authn    *authz.Authenticator
	verifier *authz.Verifier
	idp      *identity.Client
	secure   bool
	log      *slog.Logger
	now      func() time.Time
	// trusted are the proxies in front of the renderer (an ingress) whose
	// X-Forwarded-For names the browser; empty: the connecting address is
	// the browser's.
	trusted []netip.Prefix
}

// NewAuth returns the check. authn accepts bearer credentials; verifier
// checks the access tokens of signed-in people and idp signs them in
// (both nil when no identity service is configured: then only bearer
// credentials pass); secure sets the Secure attribute and the __Host-
// cookie prefix.
func NewAuth(authn *authz.Authenticator, verifier *authz.Verifier, idp *identity.Client, secure bool, log *slog.Logger) *Auth {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Auth{authn: authn, verifier: verifier, idp: idp, secure: secure, log: log, now: time.Now}
}

// NewIdentityAuth returns the check for people signing in at the identity
// service at identityURL (its public keys verify their access tokens;
// forwarderKey, when set, names each browser's address to it), with
// adminKey (may be blank) for automation.
func NewIdentityAuth(identityURL, forwarderKey, adminKey string, secure bool, log *slog.Logger) *Auth {
	jwks := authz.NewJWKS(strings.TrimRight(identityURL, "/")+"/.well-known/jwks.json", 5*time.Minute, &http.Client{Timeout: identityTimeout})
	v := authz.NewVerifier(jwks)
	return NewAuth(authz.New(v, adminKey, log), v, identity.New(identityURL, forwarderKey, identityTimeout), secure, log)
}

// TrustProxies makes the sign-in take the browser's address from the
// X-Forwarded-For of a connecting peer in trusted (RENDERER_TRUSTED_PROXIES,
// an ingress), as httpserver.ClientAddr walks it; from any other peer the
// header is ignored. It returns a.
func (a *Auth) TrustProxies(trusted []netip.Prefix) *Auth {
	a.trusted = trusted
	return a
}

// roles that may read stats and dashboards (admin always passes).
var roles = []string{authz.RoleAnalyst}

// refreshMargin is how long before its expiry a page renews the access
// token.
const refreshMargin = time.Minute

// identityTimeout bounds one call to identity from a page.
const identityTimeout = 5 * time.Second

// who is what caller found.
type who int

const (
	nobody who = iota
	someone
	unavailable // the credential may be good but cannot be checked now
)

// session is the cookie's content: identity's answer to a sign-in.
type session struct {
	Access     string `json:"a"`
	Expires    int64  `json:"e"` // the access token's expiry, Unix seconds
	Refresh    string `json:"r"`
	RefreshExp int64  `json:"re"` // the refresh token's expiry, Unix seconds
}

func fromIdentity(s identity.Session) session {
	return session{Access: s.AccessToken, Expires: s.ExpiresAt.Unix(), Refresh: s.RefreshToken, RefreshExp: s.RefreshExpiresAt.Unix()}
}

func (a *Auth) sessionName() string {
	if a.secure {
		return "__Host-tv_session"
	}
	return "tv_session"
}

func (a *Auth) csrfName() string {
	if a.secure {
		return "__Host-tv_csrf"
	}
	return "tv_csrf"
}

func (a *Auth) session(r *http.Request) (session, bool) {
	var s session
	ck, err := r.Cookie(a.sessionName())
	if err != nil || len(ck.Value) > 4096 {
		return s, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || json.Unmarshal(raw, &s) != nil || s.Access == "" {
		return s, false
	}
	return s, true
}

func (a *Auth) setSession(w http.ResponseWriter, s session) {
	raw, _ := json.Marshal(s)
	maxAge := int(time.Unix(s.RefreshExp, 0).Sub(a.now()).Seconds())
	if maxAge < 1 {
		maxAge = int(time.Unix(s.Expires, 0).Sub(a.now()).Seconds())
	}
	http.SetCookie(w, &http.Cookie{
		Name: a.sessionName(), Value: base64.RawURLEncoding.EncodeToString(raw), Path: "/", MaxAge: max(maxAge, 1),
		HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteLaxMode,
	})
}

func (a *Auth) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: a.sessionName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteLaxMode})
}

// caller returns who made r: from the bearer credential when there is one,
// else from the session cookie, renewing its access token on pages.
func (a *Auth) caller(w http.ResponseWriter, r *http.Request, page bool) (authz.Caller, who) {
	if httpserver.BearerToken(r) != "" {
		c, err := a.authn.Authenticate(r)
		switch {
		case err == nil:
			return c, someone
		case errors.Is(err, authz.ErrKeysUnavailable):
			return c, unavailable
		}
		return c, nobody
	}
	s, ok := a.session(r)
	if !ok || a.verifier == nil {
		return authz.Caller{}, nobody
	}
	if page && a.idp != nil && !a.now().Before(time.Unix(s.Expires, 0).Add(-refreshMargin)) {
		ctx, cancel := context.WithTimeout(r.Context(), identityTimeout)
		next, err := a.idp.Refresh(ctx, s.Refresh)
		cancel()
		switch {
		case err == nil:
			s = fromIdentity(next)
			a.setSession(w, s)
		case errors.Is(err, identity.ErrRefused):
			a.log.Info("session ended: refresh refused")
			a.clearSession(w)
			return authz.Caller{}, nobody
		default:
			a.log.Warn("session refresh failed", "err", err)
			if !a.now().Before(time.Unix(s.Expires, 0)) {
				return authz.Caller{}, unavailable
			}
		}
	}
	c, err := a.verifier.Verify(r.Context(), s.Access)
	switch {
	case err == nil:
		return c, someone
	case errors.Is(err, authz.ErrKeysUnavailable):
		return c, unavailable
	}
	return authz.Caller{}, nobody
}

// API answers 401/403/503 with the JSON error when r has no caller with
// the role.
func (a *Auth) API(next http.Handler) http.Handler {
	return a.require(next, false, func(w http.ResponseWriter, r *http.Request, found who) {
		switch found {
		case someone:
			httpserver.WriteError(w, http.StatusForbidden, "forbidden", "this needs role analyst or admin", nil)
		case unavailable:
			w.Header().Set("Retry-After", "5")
			httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "sign-ins cannot be checked right now; retry later", nil)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="threatview"`)
			httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid credentials", nil)
		}
	})
}

// Page sends a browser without a caller to the sign-in form, back here after.
func (a *Auth) Page(next http.Handler) http.Handler {
	return a.require(next, true, func(w http.ResponseWriter, r *http.Request, found who) {
		switch found {
		case someone:
			http.Error(w, "Your roles do not include analyst or admin, which the dashboards need.", http.StatusForbidden)
		case unavailable:
			w.Header().Set("Retry-After", "5")
			http.Error(w, "The identity service cannot be reached, so your sign-in cannot be checked. Try again shortly.", http.StatusServiceUnavailable)
		default:
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		}
	})
}

func (a *Auth) require(next http.Handler, page bool, deny func(http.ResponseWriter, *http.Request, who)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, found := a.caller(w, r, page)
		if found != someone || !c.HasAny(roles...) {
			deny(w, r, found)
			return
		}
		next.ServeHTTP(w, r.WithContext(authz.WithCaller(r.Context(), c)))
	})
}

// csrfToken returns the request's CSRF token (double-submit: the same
// random value in a cookie and in each form), setting a new one if absent.
func (a *Auth) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(a.csrfName()); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: a.csrfName(), Value: v, Path: "/",
		HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteStrictMode})
	return v
}

// csrfOK checks the form's token against the cookie.
func (a *Auth) csrfOK(r *http.Request) bool {
	ck, err := r.Cookie(a.csrfName())
	if err != nil || len(ck.Value) < 32 {
		return false
	}
	return hmac.Equal([]byte(ck.Value), []byte(r.PostFormValue("csrf")))
}
