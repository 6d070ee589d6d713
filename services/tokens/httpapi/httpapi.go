// Package httpapi serves the tokens service's HTTP API:
//
//	POST   /v1/tokens        role admin  {"app_id","name"} → 201 with the plain token, shown once
//	GET    /v1/tokens        role admin  ?app_id=&limit= → {"tokens":[...]} (never a secret or hash)
//	GET    /v1/tokens/{id}   role admin
//	DELETE /v1/tokens/{id}   role admin  revoke → 204 once announced to the collectors (503 revocation_not_announced: repeat)
//	POST   /v1/introspect    internal key {"token"} → {"active","token_id","app_id"}
//	GET    /v1/introspect/active  internal key ?limit= → {"tokens":[{"token_sha256","token_id","app_id"}]}
//	                         the active tokens most recently used or created first (a collector's warm-up)
//
// Role admin is a person's access token from the identity service or the
// admin key (platform/authz); the audit records of creations and
// revocations name the person (or "admin-key") as actor.
//
// plus /healthz, /readyz and /metrics. The admin key and the internal key
// are distinct (the config refuses equal keys), so neither grants the other's
// calls, and an app token grants none.
package httpapi

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/api"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/tokens"
)

// Keys are the bearer credentials the API accepts.
type Keys struct {
	Admin    string
	Internal string
	// People is the verifier of people's access tokens (role admin may
	// manage tokens); nil accepts the admin key only.
	People *authz.Verifier
}

// Limits on request bodies and lists.
const (
	maxBody      = 16 << 10
	defaultLimit = 100
	maxLimit     = 1000
)

type handler struct {
	svc *tokens.Service
	log *slog.Logger

	introspections *prometheus.CounterVec
	changes        *prometheus.CounterVec
}

// New returns the service's HTTP handler. reg receives the HTTP and token
// metrics; checks are run by /readyz.
func New(svc *tokens.Service, keys Keys, reg *prometheus.Registry, checks map[string]httpserver.Check, log *slog.Logger) http.Handler {
	h := &handler{
		svc: svc,
		log: log,
		introspections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokens_introspections_total",
			Help: "Token introspections by result (active, inactive, error).",
		}, []string{"result"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokens_changes_total",
			Help: "Token creations and revocations by action and result (ok, audit_unavailable, not_announced, error).",
		}, []string{"action", "result"}),
	}
	reg.MustRegister(h.introspections, h.changes)

	r := chi.NewRouter()
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)
	r.Use(httpserver.Instrument(reg, "tokens"))
	httpserver.MountOps(r, reg, checks)
	httpserver.MountSpec(r, api.Tokens)
	r.Group(func(r chi.Router) {
		r.Use(authz.New(keys.People, keys.Admin, log).Require(authz.RoleAdmin))
		r.Post("/v1/tokens", h.create)
		r.Get("/v1/tokens", h.list)
		r.Get("/v1/tokens/{id}", h.get)
		r.Delete("/v1/tokens/{id}", h.revoke)
	})
	r.With(httpserver.RequireKey(keys.Internal)).Post("/v1/introspect", h.introspect)
	r.With(httpserver.RequireKey(keys.Internal)).Get("/v1/introspect/active", h.active)
	return r
}

// tokenView is a token as the API shows it: never its secret or hash.
type tokenView struct {
	ID         string     `json:"id"`
	AppID      string     `json:"app_id"`
	Name       string     `json:"name"`
	Active     bool       `json:"active"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

func view(t tokens.Token) tokenView {
	return tokenView{
		ID: t.ID, AppID: t.AppID, Name: t.Name, Active: t.Active(),
		CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt, LastUsedAt: t.LastUsedAt,
	}
}

type createRequest struct {
	AppID string `json:"app_id"`
	Name  string `json:"name"`
}

type createResponse struct {
	tokenView
	Token string `json:"token"`
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !h.decode(w, r, &req) {
		return
	}
	t, plain, err := h.svc.Create(r.Context(), tokens.NewToken{AppID: req.AppID, Name: req.Name}, meta(r))
	if err != nil {
		h.changes.WithLabelValues(tokens.ActionCreate, resultOf(err)).Inc()
		h.fail(w, r, err)
		return
	}
	h.changes.WithLabelValues(tokens.ActionCreate, "ok").Inc()
	h.log.Info("token created", "token_id", t.ID, "app_id", t.AppID)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "/v1/tokens/"+t.ID)
	httpserver.WriteJSON(w, http.StatusCreated, createResponse{tokenView: view(t), Token: plain})
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := queryLimit(w, q, defaultLimit, maxLimit, "app_id")
	if !ok {
		return
	}
	list, err := h.svc.List(r.Context(), tokens.Filter{AppID: q.Get("app_id"), Limit: limit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]tokenView, len(list))
	for i, t := range list {
		out[i] = view(t)
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, view(t))
}

func (h *handler) revoke(w http.ResponseWriter, r *http.Request) {
	t, err := h.svc.Revoke(r.Context(), chi.URLParam(r, "id"), meta(r))
	if err != nil {
		h.changes.WithLabelValues(tokens.ActionRevoke, resultOf(err)).Inc()
		if errors.Is(err, tokens.ErrNotAnnounced) {
			// Revoked in the database, but a collector serving from its cache
			// through a tokens outage might not know: the operator repeats the
			// call, which announces it again.
			h.log.Error("token revoked without announcement", "token_id", t.ID, "err", err)
			w.Header().Set("Retry-After", "5")
			httpserver.WriteError(w, http.StatusServiceUnavailable, "revocation_not_announced",
				"token revoked, but the collectors were not told through the broker; repeat the request", map[string]any{"revoked": true})
			return
		}
		if errors.Is(err, tokens.ErrAuditUnavailable) {
			// The token is revoked, but the promise of an audit record is not
			// kept yet: tell the operator to repeat the call.
			h.log.Error("token revoked without audit record", "token_id", t.ID, "err", err)
			w.Header().Set("Retry-After", "5")
			httpserver.WriteError(w, http.StatusServiceUnavailable, "audit_unavailable",
				"token revoked, but the audit logger did not record it; repeat the request", map[string]any{"revoked": true})
			return
		}
		h.fail(w, r, err)
		return
	}
	h.changes.WithLabelValues(tokens.ActionRevoke, "ok").Inc()
	h.log.Info("token revoked", "token_id", t.ID, "app_id", t.AppID)
	w.WriteHeader(http.StatusNoContent)
}

type introspectRequest struct {
	Token string `json:"token"`
}

type introspectResponse struct {
	Active  bool   `json:"active"`
	TokenID string `json:"token_id,omitempty"`
	AppID   string `json:"app_id,omitempty"`
}

func (h *handler) introspect(w http.ResponseWriter, r *http.Request) {
	var req introspectRequest
	if !h.decode(w, r, &req) {
		return
	}
	t, err := h.svc.Introspect(r.Context(), req.Token)
	switch {
	case errors.Is(err, tokens.ErrNotFound):
		h.introspections.WithLabelValues("inactive").Inc()
		httpserver.WriteJSON(w, http.StatusOK, introspectResponse{Active: false})
	case err != nil:
		h.introspections.WithLabelValues("error").Inc()
		h.fail(w, r, err)
	default:
		h.introspections.WithLabelValues("active").Inc()
		httpserver.WriteJSON(w, http.StatusOK, introspectResponse{Active: true, TokenID: t.ID, AppID: t.AppID})
	}
}

type activeToken struct {
	TokenSHA256 string `json:"token_sha256"`
	TokenID     string `json:"token_id"`
	AppID       string `json:"app_id"`
}

// defaultActive is how many tokens /v1/introspect/active lists without a
// limit.
const defaultActive = 10_000

// active lists the active tokens by hash (never a plain token: the plain
// form is not stored) for a collector warming its cache.
func (h *handler) active(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryLimit(w, r.URL.Query(), defaultActive, tokens.MaxActive)
	if !ok {
		return
	}
	list, err := h.svc.Active(r.Context(), limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := struct {
		Tokens []activeToken `json:"tokens"`
	}{Tokens: make([]activeToken, len(list))}
	for i, t := range list {
		out.Tokens[i] = activeToken{TokenSHA256: hex.EncodeToString(t.Hash[:]), TokenID: t.ID, AppID: t.AppID}
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

// queryLimit reads the query's limit (def when absent, 1..most) and refuses
// parameters other than limit and allowed; when it answered the error
// itself it returns false.
func queryLimit(w http.ResponseWriter, q url.Values, def, most int, allowed ...string) (int, bool) {
	for k := range q {
		if k != "limit" && !slices.Contains(allowed, k) {
			httpserver.WriteError(w, http.StatusBadRequest, "invalid_query", "unknown query parameter", map[string]string{"parameter": k})
			return 0, false
		}
	}
	s := q.Get("limit")
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_query", fmt.Sprintf("limit must be an integer from 1 to %d", most), map[string]string{"parameter": "limit"})
		return 0, false
	}
	return n, true
}

// decode reads one JSON object into dst (httpserver.DecodeJSON): operators
// call these endpoints with curl -d, which labels the body as a form.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	return httpserver.DecodeJSON(w, r, dst, maxBody, nil)
}

// statusOf is the one table from domain errors to HTTP statuses.
var statusOf = []struct {
	err    error
	status int
	code   string
}{
	{tokens.ErrMalformed, http.StatusBadRequest, "malformed"},
	{tokens.ErrInvalid, http.StatusUnprocessableEntity, "invalid"},
	{tokens.ErrNotFound, http.StatusNotFound, "not_found"},
	{tokens.ErrConflict, http.StatusConflict, "conflict"},
	{tokens.ErrAuditUnavailable, http.StatusServiceUnavailable, "audit_unavailable"},
}

// fail writes err with its status; unknown errors are logged and answered
// with a generic 500.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	for _, e := range statusOf {
		if errors.Is(err, e.err) {
			msg := e.err.Error()
			switch e.err {
			case tokens.ErrMalformed, tokens.ErrInvalid:
				msg = err.Error() // says which field and why; carries no secret
			case tokens.ErrAuditUnavailable:
				h.log.Error("audit failed", "path", r.URL.Path, "err", err)
				w.Header().Set("Retry-After", "5")
				msg = "the audit logger is unavailable; nothing was changed"
			}
			httpserver.WriteError(w, e.status, e.code, msg, nil)
			return
		}
	}
	h.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	httpserver.WriteError(w, http.StatusInternalServerError, "internal", "internal error", nil)
}

func resultOf(err error) string {
	if errors.Is(err, tokens.ErrNotAnnounced) {
		return "not_announced"
	}
	if errors.Is(err, tokens.ErrAuditUnavailable) {
		return "audit_unavailable"
	}
	return "error"
}

func meta(r *http.Request) tokens.Meta {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	rid := r.Header.Get("X-Request-ID")
	if len(rid) > 64 {
		rid = rid[:64]
	}
	ua := r.UserAgent()
	if len(ua) > 256 {
		ua = ua[:256]
	}
	c, _ := authz.FromContext(r.Context())
	return tokens.Meta{Actor: c.Actor(), ClientIP: ip, UserAgent: ua, RequestID: rid}
}
