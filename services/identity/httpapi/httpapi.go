// Package httpapi serves the identity service's HTTP API:
//
//	POST   /v1/login                      {"username","password"} → 200 session
//	POST   /v1/refresh                    {"refresh_token"} → 200 session (the old token is used up)
//	POST   /v1/logout                     {"refresh_token"} → 204 (revokes the sign-in's refresh tokens)
//	GET    /v1/me                         any signed-in person (with their profile)
//	PATCH  /v1/me                         {"display_name"?, "email"?, "phone"?} → 200 (blank erases)
//	POST   /v1/me/password                {"current_password","new_password"} → 204
//	GET    /v1/users                      role user_admin {"users": [...]}
//	POST   /v1/users                      role user_admin {"username","password","roles","display_name"?} → 201
//	GET    /v1/users/{username}           role user_admin
//	PATCH  /v1/users/{username}           role user_admin {"roles"?, "disabled"?, "display_name"?} → 200
//	DELETE /v1/users/{username}           role user_admin → 204
//	PUT    /v1/users/{username}/password  role user_admin {"password"} → 204
//
// Role admin (an Account Owner) passes every check; a User Administrator
// (user_admin) may not touch an Account Owner nor make one (403), and
// nobody may delete, demote or lock the last active Account Owner (409).
//
//	GET    /v1/oidc/login                 302 to the identity provider (when configured)
//	GET    /v1/oidc/callback              the provider's redirect → 200 session
//	GET    /.well-known/jwks.json         the access tokens' public keys
//
// plus /healthz, /readyz and /metrics. A session is {"access_token",
// "token_type", "expires_at", "refresh_token", "refresh_expires_at",
// "user":{"username","roles"}}. Role checks use platform/authz, which also
// accepts the admin key (as role admin, audited as "admin-key").
//
// The client address (for throttling, and as its /24 or /48 in the audit
// trail) is the peer's, or X-Forwarded-For's when the peer is a trusted
// proxy or presents the forwarder key in X-Forwarder-Key (the admin
// interface naming the browser it signs in for).
package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"threatview/api"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/identity"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
)

// OIDC is the sign-in through the company's identity provider (package
// oidc implements it).
type OIDC interface {
	// Start returns the provider's authorization URL for a new sign-in and
	// its state, which the browser must bring back.
	Start(ctx context.Context) (authURL, state string, err error)
	// Finish exchanges the code of the provider's redirect and returns the
	// person (issuer, subject, username and roles). Errors:
	// identity.ErrBadCredentials (bad state, code or token).
	Finish(ctx context.Context, state, code string) (identity.OIDCPerson, error)
}

// Options configure the API.
type Options struct {
	// AdminKey is accepted as role admin (blank: refused).
	AdminKey string
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (its rightmost address), for throttling and the audit trail.
	TrustedProxies []netip.Prefix
	// ForwarderKey, when set, lets a caller presenting it in the
	// X-Forwarder-Key header (the admin interface, which signs people in on
	// behalf of their browsers) name the client in X-Forwarded-For from any
	// address: a trusted hop proved by a credential, not by where it is.
	ForwarderKey string
	// OIDC is nil when sign-in through an identity provider is off.
	OIDC OIDC
	// SecureCookies marks the OIDC state cookie Secure (behind HTTPS).
	SecureCookies bool
}

// stateCookie binds an OIDC sign-in to the browser that started it.
const stateCookie = "tv_oidc_state"

const maxBody = 16 << 10

type handler struct {
	svc    *identity.Service
	opts   Options
	log    *slog.Logger
	logins *prometheus.CounterVec
}

// New returns the service's HTTP handler.
func New(svc *identity.Service, opts Options, reg *prometheus.Registry, checks map[string]httpserver.Check, log *slog.Logger) http.Handler {
	h := &handler{svc: svc, opts: opts, log: log,
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "identity_logins_total",
			Help: "Sign-ins by method (password, oidc, refresh) and result (ok, bad_credentials, throttled, forbidden, error).",
		}, []string{"method", "result"}),
	}
	reg.MustRegister(h.logins)
	auth := authz.New(authz.NewVerifier(svc.Keys()), opts.AdminKey, log)

	r := chi.NewRouter()
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)
	r.Use(httpserver.Instrument(reg, "identity"))
	r.Use(noStore)
	httpserver.MountOps(r, reg, checks)
	httpserver.MountSpec(r, api.Identity)
	r.Get("/.well-known/jwks.json", h.jwks)
	r.Post("/v1/login", h.login)
	r.Post("/v1/refresh", h.refresh)
	r.Post("/v1/logout", h.logout)
	r.Get("/v1/oidc/login", h.oidcLogin)
	r.Get("/v1/oidc/callback", h.oidcCallback)
	r.With(auth.Require()).Get("/v1/me", h.me)
	r.With(auth.Require()).Patch("/v1/me", h.updateProfile)
	r.With(auth.Require()).Post("/v1/me/password", h.changePassword)
	r.Group(func(r chi.Router) {
		r.Use(auth.Require(authz.RoleUserAdmin))
		r.Get("/v1/users", h.listUsers)
		r.Post("/v1/users", h.createUser)
		r.Get("/v1/users/{username}", h.getUser)
		r.Patch("/v1/users/{username}", h.updateUser)
		r.Delete("/v1/users/{username}", h.deleteUser)
		r.Put("/v1/users/{username}/password", h.setPassword)
	})
	return r
}

// noStore keeps answers (tokens, people) out of every cache.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/jwks.json" {
			w.Header().Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

type userView struct {
	Username    string     `json:"username"`
	DisplayName string     `json:"display_name"`
	Roles       []string   `json:"roles"`
	Source      string     `json:"source,omitempty"`
	Disabled    bool       `json:"disabled"`
	CreatedAt   *time.Time `json:"created_at,omitempty"`
	LastLoginAt *time.Time `json:"last_login_at,omitempty"`
}

// profileView is a person's own view of themselves (GET /v1/me): the
// contact fields are shown to nobody else.
type profileView struct {
	userView
	Email string `json:"email"`
	Phone string `json:"phone"`
}

func view(u identity.User) userView {
	roles := u.Roles
	if roles == nil {
		roles = []string{}
	}
	v := userView{Username: u.Username, DisplayName: u.DisplayName, Roles: roles, Source: u.Source, Disabled: u.Disabled, LastLoginAt: u.LastLoginAt}
	if !u.CreatedAt.IsZero() {
		c := u.CreatedAt
		v.CreatedAt = &c
	}
	return v
}

type sessionView struct {
	AccessToken      string    `json:"access_token"`
	TokenType        string    `json:"token_type"`
	ExpiresAt        time.Time `json:"expires_at"`
	RefreshToken     string    `json:"refresh_token"`
	RefreshExpiresAt time.Time `json:"refresh_expires_at"`
	User             struct {
		Username string   `json:"username"`
		Roles    []string `json:"roles"`
	} `json:"user"`
}

func writeSession(w http.ResponseWriter, s identity.Session) {
	v := sessionView{AccessToken: s.AccessToken, TokenType: "Bearer", ExpiresAt: s.ExpiresAt,
		RefreshToken: s.RefreshToken, RefreshExpiresAt: s.RefreshExpiresAt}
	v.User.Username, v.User.Roles = s.User.Username, view(s.User).Roles
	httpserver.WriteJSON(w, http.StatusOK, v)
}

func (h *handler) jwks(w http.ResponseWriter, r *http.Request) {
	// Short caching: a rotated key must reach the verifiers quickly.
	w.Header().Set("Cache-Control", "public, max-age=60")
	httpserver.WriteJSON(w, http.StatusOK, h.svc.Keys().JWKSet())
}

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if !decode(w, r, &req) {
		return
	}
	s, err := h.svc.Login(r.Context(), req.Username, req.Password, h.meta(r))
	h.count("password", err)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeSession(w, s)
}

type refreshRequest struct {
	RefreshToken string `json:"refresh_token"`
}

func (h *handler) refresh(w http.ResponseWriter, r *http.Request) {
	var req refreshRequest
	if !decode(w, r, &req) {
		return
	}
	s, err := h.svc.Refresh(r.Context(), req.RefreshToken)
	h.count("refresh", err)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeSession(w, s)
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	var req refreshRequest
	if !decode(w, r, &req) {
		return
	}
	if err := h.svc.Logout(r.Context(), req.RefreshToken, h.meta(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) me(w http.ResponseWriter, r *http.Request) {
	c, _ := authz.FromContext(r.Context())
	if c.AdminKey {
		httpserver.WriteJSON(w, http.StatusOK, userView{Username: authz.ActorAdminKey, Roles: c.Roles})
		return
	}
	u, err := h.svc.GetUser(r.Context(), c.Username)
	if errors.Is(err, identity.ErrNotFound) || err == nil && u.Disabled {
		// Deleted or disabled since the token was issued: here, where the
		// person is at hand, the token is no longer good.
		httpserver.WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid credentials", nil)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, profileView{view(u), u.Email, u.Phone})
}

type profileRequest struct {
	DisplayName *string `json:"display_name"`
	Email       *string `json:"email"`
	Phone       *string `json:"phone"`
}

func (h *handler) updateProfile(w http.ResponseWriter, r *http.Request) {
	c, _ := authz.FromContext(r.Context())
	if c.AdminKey {
		httpserver.WriteError(w, http.StatusBadRequest, "no_person", "the admin key is not a person and has no profile", nil)
		return
	}
	var req profileRequest
	if !decode(w, r, &req) {
		return
	}
	u, err := h.svc.UpdateProfile(r.Context(), c.Username, identity.Profile{DisplayName: req.DisplayName, Email: req.Email, Phone: req.Phone}, h.meta(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, profileView{view(u), u.Email, u.Phone})
}

type passwordChange struct {
	Current string `json:"current_password"`
	New     string `json:"new_password"`
}

func (h *handler) changePassword(w http.ResponseWriter, r *http.Request) {
	c, _ := authz.FromContext(r.Context())
	if c.AdminKey {
		httpserver.WriteError(w, http.StatusBadRequest, "no_person", "the admin key is not a person; use PUT /v1/users/{username}/password", nil)
		return
	}
	var req passwordChange
	if !decode(w, r, &req) {
		return
	}
	if err := h.svc.ChangePassword(r.Context(), c.Username, req.Current, req.New, h.meta(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) listUsers(w http.ResponseWriter, r *http.Request) {
	list, err := h.svc.ListUsers(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]userView, len(list))
	for i, u := range list {
		out[i] = view(u)
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"users": out})
}

type createRequest struct {
	Username    string   `json:"username"`
	Password    string   `json:"password"`
	Roles       []string `json:"roles"`
	DisplayName string   `json:"display_name"`
}

func (h *handler) createUser(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !decode(w, r, &req) {
		return
	}
	u, err := h.svc.CreateUser(r.Context(), identity.NewUser{Username: req.Username, Password: req.Password, Roles: req.Roles, DisplayName: req.DisplayName}, h.meta(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.Info("user created", "username", u.Username, "roles", u.Roles, "actor", h.meta(r).Actor)
	w.Header().Set("Location", "/v1/users/"+u.Username)
	httpserver.WriteJSON(w, http.StatusCreated, view(u))
}

func (h *handler) getUser(w http.ResponseWriter, r *http.Request) {
	u, err := h.svc.GetUser(r.Context(), chi.URLParam(r, "username"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, view(u))
}

type updateRequest struct {
	Roles       *[]string `json:"roles"`
	Disabled    *bool     `json:"disabled"`
	DisplayName *string   `json:"display_name"`
}

func (h *handler) updateUser(w http.ResponseWriter, r *http.Request) {
	var req updateRequest
	if !decode(w, r, &req) {
		return
	}
	u, err := h.svc.UpdateUser(r.Context(), chi.URLParam(r, "username"), identity.UserChange{Roles: req.Roles, Disabled: req.Disabled, Profile: identity.Profile{DisplayName: req.DisplayName}}, h.meta(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.Info("user updated", "username", u.Username, "roles", u.Roles, "disabled", u.Disabled, "actor", h.meta(r).Actor)
	httpserver.WriteJSON(w, http.StatusOK, view(u))
}

func (h *handler) deleteUser(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "username")
	if err := h.svc.DeleteUser(r.Context(), name, h.meta(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.Info("user deleted", "username", name, "actor", h.meta(r).Actor)
	w.WriteHeader(http.StatusNoContent)
}

type setPasswordRequest struct {
	Password string `json:"password"`
}

func (h *handler) setPassword(w http.ResponseWriter, r *http.Request) {
	var req setPasswordRequest
	if !decode(w, r, &req) {
		return
	}
	if err := h.svc.SetPassword(r.Context(), chi.URLParam(r, "username"), req.Password, h.meta(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if h.opts.OIDC == nil {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "sign-in through an identity provider is not configured", nil)
		return
	}
	authURL, state, err := h.opts.OIDC.Start(r.Context())
	if err != nil {
		h.log.Error("oidc start failed", "err", err)
		w.Header().Set("Retry-After", "5")
		httpserver.WriteError(w, http.StatusServiceUnavailable, "idp_unavailable", "the identity provider is unavailable", nil)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: state, Path: "/v1/oidc/", MaxAge: 600,
		HttpOnly: true, Secure: h.opts.SecureCookies, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, authURL, http.StatusFound)
}

func (h *handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if h.opts.OIDC == nil {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "sign-in through an identity provider is not configured", nil)
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		h.logins.WithLabelValues("oidc", "bad_credentials").Inc()
		httpserver.WriteError(w, http.StatusUnauthorized, "idp_refused", "the identity provider refused the sign-in", map[string]string{"idp_error": truncate(e, 64)})
		return
	}
	state, code := q.Get("state"), q.Get("code")
	c, err := r.Cookie(stateCookie)
	// The state must come back to the browser that started the sign-in
	// (login CSRF).
	if err != nil || state == "" || code == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		h.logins.WithLabelValues("oidc", "bad_credentials").Inc()
		httpserver.WriteError(w, http.StatusUnauthorized, "invalid_state", "the sign-in state is missing, unknown or expired; start again", nil)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: "", Path: "/v1/oidc/", MaxAge: -1, HttpOnly: true, Secure: h.opts.SecureCookies, SameSite: http.SameSiteLaxMode})
	person, err := h.opts.OIDC.Finish(r.Context(), state, code)
	if err != nil {
		h.count("oidc", err)
		if !errors.Is(err, identity.ErrBadCredentials) {
			h.log.Error("oidc finish failed", "err", err)
		}
		h.fail(w, r, err)
		return
	}
	s, err := h.svc.SignInOIDC(r.Context(), person, h.meta(r))
	h.count("oidc", err)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeSession(w, s)
}

func (h *handler) count(method string, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, identity.ErrBadCredentials):
		result = "bad_credentials"
	case errors.Is(err, identity.ErrThrottled):
		result = "throttled"
	case errors.Is(err, identity.ErrForbidden):
		result = "forbidden"
	default:
		result = "error"
	}
	h.logins.WithLabelValues(method, result).Inc()
}

// decode reads one JSON object into dst (httpserver.DecodeJSON); an
// unknown field is named only when it looks like a field name, since it may
// be a pasted secret.
func decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	return httpserver.DecodeJSON(w, r, dst, maxBody, plainName)
}

// statusOf is the one table from domain errors to HTTP statuses.
var statusOf = []struct {
	err    error
	status int
	code   string
}{
	{identity.ErrThrottled, http.StatusTooManyRequests, "throttled"},
	{identity.ErrBadCredentials, http.StatusUnauthorized, "invalid_credentials"},
	{identity.ErrForbidden, http.StatusForbidden, "forbidden"},
	{identity.ErrInvalid, http.StatusUnprocessableEntity, "invalid"},
	{identity.ErrNotFound, http.StatusNotFound, "not_found"},
	{identity.ErrConflict, http.StatusConflict, "conflict"},
	{identity.ErrAuditUnavailable, http.StatusServiceUnavailable, "audit_unavailable"},
}

// fail writes err with its status; unknown errors are logged and answered
// with a generic 500.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	for _, e := range statusOf {
		if !errors.Is(err, e.err) {
			continue
		}
		msg := e.err.Error()
		switch e.err {
		case identity.ErrInvalid, identity.ErrConflict, identity.ErrForbidden:
			msg = err.Error() // says which field and why; carries no secret
		case identity.ErrThrottled:
			var te *identity.ThrottledError
			secs := 60
			if errors.As(err, &te) {
				secs = int(math.Ceil(te.RetryAfter.Seconds()))
			}
			w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
		case identity.ErrAuditUnavailable:
			h.log.Error("audit failed", "path", r.URL.Path, "err", err)
			w.Header().Set("Retry-After", "5")
			msg = "the audit logger is unavailable; nothing was changed"
		case identity.ErrBadCredentials:
			if r.URL.Path != "/v1/login" {
				msg = "invalid or expired credentials"
			}
		}
		httpserver.WriteError(w, e.status, e.code, msg, nil)
		return
	}
	h.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	httpserver.WriteError(w, http.StatusInternalServerError, "internal", "internal error", nil)
}

func (h *handler) meta(r *http.Request) identity.Meta {
	c, _ := authz.FromContext(r.Context())
	rid := truncate(r.Header.Get("X-Request-ID"), 64)
	ip, full := h.clientIP(r), ""
	if ip.IsValid() {
		full = ip.String()
	}
	return identity.Meta{Actor: c.Actor(), NotOwner: !c.HasAny(authz.RoleAdmin), ClientIP: full, ClientNet: httpserver.PrivateAddr(ip),
		UserAgent: truncate(r.UserAgent(), 256), RequestID: rid}
}

// clientIP is the peer's address, or, when the peer is a trusted proxy or
// presents the forwarder key, the rightmost address of X-Forwarded-For.
func (h *handler) clientIP(r *http.Request) netip.Addr {
	trusted := h.opts.TrustedProxies
	if k := r.Header.Get("X-Forwarder-Key"); k != "" && h.opts.ForwarderKey != "" &&
		subtle.ConstantTimeCompare([]byte(k), []byte(h.opts.ForwarderKey)) == 1 {
		if a := httpserver.ClientAddr(r, nil); a.IsValid() {
			// Only the forwarder's own hop is trusted, not any it names.
			trusted = []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}
		}
	}
	return httpserver.ClientAddr(r, trusted)
}

// plainName reports whether s looks like a field name (1 to 32 lower-case
// letters and underscores), safe to echo.
func plainName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "?")
}
