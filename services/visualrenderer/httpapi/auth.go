package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
)

// Cookie names. The __Host- prefix pins a cookie to this host and path /
// and requires Secure, so it is used only when cookies are Secure.
const (
	sessionCookie = "tv_session"
	csrfCookie    = "tv_csrf"
)

// Auth is the one check in front of every stats, chart and dashboard
// route. A request passes with role analyst or admin, as either
//   - "Authorization: Bearer <credential>" (the admin key, or an access
//     token from the identity service when a verifier is configured), or
//   - a session cookie, set by the sign-in form after the admin key was
//     typed in: an expiry and an HMAC over it, keyed by a key derived from
//     the admin key, so any replica can check it, and changing the admin key
//     signs everyone out. The cookie is HttpOnly, SameSite=Strict and
//     (unless turned off for plain-HTTP development) Secure.
//
// To accept people's access tokens in the browser later, the sign-in form
// posts the username and password to the identity service and keeps the
// access token instead; Require does not change.
type Auth struct {
	authn  *authz.Authenticator
	key    string
	mac    []byte
	ttl    time.Duration
	secure bool
	now    func() time.Time
}

// NewAuth returns the check. authn accepts bearer credentials; adminKey
// signs session cookies valid for ttl; secure sets the Secure attribute.
func NewAuth(authn *authz.Authenticator, adminKey string, ttl time.Duration, secure bool) *Auth {
	m := hmac.New(sha256.New, []byte(adminKey))
	m.Write([]byte("threatview visualrenderer session v1"))
	return &Auth{authn: authn, key: adminKey, mac: m.Sum(nil), ttl: ttl, secure: secure, now: time.Now}
}

// roles that may read stats and dashboards (admin always passes).
var roles = []string{authz.RoleAnalyst}

// caller returns who made r: from the bearer credential when there is one,
// else from the session cookie.
func (a *Auth) caller(r *http.Request) (authz.Caller, bool) {
	if httpserver.BearerToken(r) != "" {
		c, err := a.authn.Authenticate(r)
		return c, err == nil
	}
	if ck, err := r.Cookie(sessionCookie); err == nil && a.validSession(ck.Value) {
		return authz.Caller{AdminKey: true, Roles: []string{authz.RoleAdmin}}, true
	}
	return authz.Caller{}, false
}

// API answers 401/403 with the JSON error when r has no caller with the role.
func (a *Auth) API(next http.Handler) http.Handler {
	return a.require(next, func(w http.ResponseWriter, r *http.Request, known bool) {
		if known {
			httpserver.WriteError(w, http.StatusForbidden, "forbidden", "this needs role analyst or admin", nil)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="threatview"`)
		httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid credentials", nil)
	})
}

// Page sends a browser without a caller to the sign-in form, back here after.
func (a *Auth) Page(next http.Handler) http.Handler {
	return a.require(next, func(w http.ResponseWriter, r *http.Request, known bool) {
		if known {
			http.Error(w, "this needs role analyst or admin", http.StatusForbidden)
			return
		}
		http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	})
}

func (a *Auth) require(next http.Handler, deny func(http.ResponseWriter, *http.Request, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := a.caller(r)
		if !ok || !c.HasAny(roles...) {
			deny(w, r, ok)
			return
		}
		next.ServeHTTP(w, r.WithContext(authz.WithCaller(r.Context(), c)))
	})
}

func (a *Auth) sign(payload string) string {
	m := hmac.New(sha256.New, a.mac)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns a cookie value "v1.<expiry unix>.<mac>".
func (a *Auth) newSession() (string, time.Time) {
	exp := a.now().Add(a.ttl).Truncate(time.Second)
	p := "v1." + strconv.FormatInt(exp.Unix(), 10)
	return p + "." + a.sign(p), exp
}

func (a *Auth) validSession(v string) bool {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !strings.HasPrefix(v, "v1.") {
		return false
	}
	p, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(a.sign(p))) {
		return false
	}
	exp, err := strconv.ParseInt(p[3:], 10, 64)
	return err == nil && a.now().Unix() < exp
}

func (a *Auth) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteStrictMode,
	})
}

// csrfToken returns the request's CSRF token (double-submit: the same
// random value in a cookie and in each form), setting a new one if absent.
func (a *Auth) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	a.setCookie(w, csrfCookie, v, 0)
	return v
}

// csrfOK checks the form's token against the cookie.
func csrfOK(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) < 32 {
		return false
	}
	return hmac.Equal([]byte(ck.Value), []byte(r.PostFormValue("csrf")))
}

// checkKey compares a typed-in key with the admin key in constant time.
func (a *Auth) checkKey(k string) bool { return httpserver.KeyEqual(strings.TrimSpace(k), a.key) }
