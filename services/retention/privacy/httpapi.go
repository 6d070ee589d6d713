package privacy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// Auditor writes one audit record (platform/auditclient).
type Auditor interface {
	Audit(ctx context.Context, rec wire.AuditRecord) error
}

// API serves /v1/erasures and /v1/suppressions (role admin or the admin key).
type API struct {
	store  Store
	audit  Auditor
	runner interface{ Wake() }
	log    *slog.Logger
	// users pseudonymises a user erasure's raw user id (nil: user
	// erasures are refused).
	users *wire.Pseudonymizer
}

// NewAPI returns the API; runner (may be nil) is woken on each new request.
func NewAPI(store Store, audit Auditor, runner interface{ Wake() }, log *slog.Logger) *API {
	return &API{store: store, audit: audit, runner: runner, log: log}
}

// WithUserKeys makes the API accept erasures by user id: the raw id is
// pseudonymised with every key of p (PRIVACY_USER_ID_KEYS, the
// collector's keys), so events stored under an older key are found too.
// It returns a.
func (a *API) WithUserKeys(p *wire.Pseudonymizer) *API {
	a.users = p
	return a
}

// Handler returns the service's router: the ops endpoints (checks for
// /readyz), GET /openapi.json (the document spec, when given) and the API
// behind auth.
func (a *API) Handler(auth *authz.Authenticator, reg *prometheus.Registry, checks map[string]httpserver.Check, spec []byte) chi.Router {
	r := chi.NewRouter()
	r.Use(httpserver.Instrument(reg, "privacy"))
	httpserver.MountOps(r, reg, checks)
	if spec != nil {
		httpserver.MountSpec(r, spec)
	}
	a.Mount(r, auth)
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)
	return r
}

// Mount adds the routes to r behind auth.
func (a *API) Mount(r chi.Router, auth *authz.Authenticator) {
	r.Group(func(r chi.Router) {
		r.Use(auth.Require(authz.RoleAdmin))
		r.Post("/v1/erasures", a.create)
		r.Get("/v1/erasures", a.list)
		r.Get("/v1/erasures/{id}", a.get)
		r.Get("/v1/suppressions", a.suppressions)
		r.Delete("/v1/suppressions", a.lift)
	})
}

// request is the body of POST /v1/erasures: device_id or user_id (the
// raw id, never stored: only its pseudonyms are).
type request struct {
	AppID    string  `json:"app_id"`
	DeviceID string  `json:"device_id"`
	UserID   *string `json:"user_id"`
	Suppress *bool   `json:"suppress"`
}

// fieldError is a 422 naming the field.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + " " + e.msg }

// subjectOf checks a request and returns its erasure: a device's, or a
// user's with the raw id's pseudonyms under every key (the id itself is
// not kept). Errors are *fieldError.
func (a *API) subjectOf(req request) (*Erasure, error) {
	if req.UserID == nil {
		s := Subject{AppID: req.AppID, DeviceID: req.DeviceID}
		if err := validate(s); err != nil {
			return nil, err
		}
		return &Erasure{AppID: s.AppID, DeviceID: s.DeviceID, Suppress: req.Suppress == nil || *req.Suppress}, nil
	}
	switch uid := *req.UserID; {
	case req.DeviceID != "":
		return nil, &fieldError{"user_id", "and device_id are given: an erasure names one device or one user, not both"}
	case strings.TrimSpace(uid) == "":
		return nil, &fieldError{"user_id", "is empty"}
	case len(uid) > MaxUserID:
		return nil, &fieldError{"user_id", "is longer than " + strconv.Itoa(MaxUserID) + " bytes"}
	case !utf8.ValidString(uid) || strings.ContainsRune(uid, 0):
		return nil, &fieldError{"user_id", "is not valid text"}
	case req.Suppress != nil && *req.Suppress:
		return nil, &fieldError{"suppress", "cannot be true with user_id: the processor suppresses devices only, not users; leave it out or send false"}
	case a.users == nil:
		return nil, &fieldError{"user_id", "cannot be erased: this service has no user id key (PRIVACY_USER_ID_KEYS)"}
	}
	if err := validate(Subject{AppID: req.AppID, DeviceID: "-"}); err != nil {
		return nil, err
	}
	return &Erasure{AppID: req.AppID, UserPseudonyms: a.users.All(*req.UserID)}, nil
}

// validate checks a device subject's fields; errors are *fieldError.
func validate(s Subject) error {
	field := func(name, v string, max int) error {
		switch {
		case strings.TrimSpace(v) == "":
			return &fieldError{name, "is required"}
		case len(v) > max:
			return &fieldError{name, "is longer than " + strconv.Itoa(max) + " bytes"}
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			return &fieldError{name, "is not valid text"}
		}
		return nil
	}
	if err := field("app_id", s.AppID, MaxAppID); err != nil {
		return err
	}
	return field("device_id", s.DeviceID, MaxDeviceID)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	var req request
	if !httpserver.DecodeJSON(w, r, &req, 4<<10, nil) {
		return
	}
	e, err := a.subjectOf(req)
	if err != nil {
		invalid(w, err)
		return
	}
	caller, _ := authz.FromContext(r.Context())
	e.ID, e.RequestedBy = uuid.Must(uuid.NewV7()).String(), caller.Actor()
	if err := a.store.Create(r.Context(), e); err != nil {
		a.fail(w, err)
		return
	}
	// The request is stored pending, audited, and only then queued: no
	// runner takes a pending erasure and no job suppresses its subject, so
	// one whose audit record could not be written is withdrawn having
	// done nothing (a pending row a crash left behind is removed by the
	// runner after a minute).
	if err := a.record(r, "privacy.erasure.request", "/v1/erasures/"+e.ID, http.StatusAccepted); err != nil {
		_ = a.store.Delete(context.WithoutCancel(r.Context()), e.ID)
		a.log.Error("erasure not audited; withdrawn", "erasure_id", e.ID, "err", err)
		unavailableError(w, "the audit trail is unavailable; nothing was changed")
		return
	}
	if err := a.store.Queue(context.WithoutCancel(r.Context()), e); err != nil {
		_ = a.store.Delete(context.WithoutCancel(r.Context()), e.ID)
		a.log.Error("erasure not queued; withdrawn", "erasure_id", e.ID, "err", err)
		unavailableError(w, "the database is unavailable; nothing was changed")
		return
	}
	if a.runner != nil {
		a.runner.Wake()
	}
	w.Header().Set("Location", "/v1/erasures/"+e.ID)
	httpserver.WriteJSON(w, http.StatusAccepted, map[string]string{"id": e.ID, "status": e.Status})
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, err := uuid.Parse(id); err != nil {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no such erasure", nil)
		return
	}
	e, err := a.store.Get(r.Context(), id)
	if err != nil {
		a.fail(w, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, e)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			httpserver.WriteError(w, http.StatusUnprocessableEntity, "invalid", "limit must be 1..1000", nil)
			return
		}
		limit = n
	}
	list, err := a.store.List(r.Context(), limit)
	if err != nil {
		a.fail(w, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"erasures": list})
}

func (a *API) suppressions(w http.ResponseWriter, r *http.Request) {
	list, err := a.store.Suppressions(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"suppressions": list})
}

// lift ends a suppression: DELETE /v1/suppressions?app_id=&device_id=.
func (a *API) lift(w http.ResponseWriter, r *http.Request) {
	s := Subject{AppID: r.URL.Query().Get("app_id"), DeviceID: r.URL.Query().Get("device_id")}
	if err := validate(s); err != nil {
		invalid(w, err)
		return
	}
	// Refused before it is audited while an erasure of the subject is
	// open; the store checks again in the statement that lifts.
	if err := a.store.CheckLift(r.Context(), s); err != nil {
		a.fail(w, err)
		return
	}
	if err := a.record(r, "privacy.suppression.lift", "/v1/suppressions", http.StatusNoContent); err != nil {
		unavailableError(w, "the audit trail is unavailable; nothing was changed")
		return
	}
	caller, _ := authz.FromContext(r.Context())
	if err := a.store.LiftSuppression(r.Context(), s, caller.Actor()); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// record audits an admin action with the person (or the admin key) as the
// actor; the subject's device id is not written into the audit trail.
func (a *API) record(r *http.Request, action, resource string, status int) error {
	if a.audit == nil {
		return nil
	}
	caller, _ := authz.FromContext(r.Context())
	rid := r.Header.Get("X-Request-ID")
	if len(rid) > 64 {
		rid = rid[:64]
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	return a.audit.Audit(ctx, wire.AuditRecord{ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(),
		ActorToken: caller.Actor(), Action: action, Resource: resource, Outcome: status, RequestID: rid})
}

// fail maps the service's errors to statuses.
func (a *API) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no such erasure or suppression", nil)
	case errors.Is(err, ErrUnknownApp):
		httpserver.WriteError(w, http.StatusUnprocessableEntity, "unknown_app", "no data is stored for this app_id", nil)
	case errors.Is(err, ErrBusy):
		httpserver.WriteError(w, http.StatusConflict, "erasure_in_progress", "an erasure of this device or user is already queued or running", nil)
	case errors.Is(err, ErrUnavailable):
		a.log.Error("privacy request failed", "err", err)
		unavailableError(w, "the database is unavailable; nothing was changed")
	default:
		a.log.Error("privacy request failed", "err", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "internal", "internal error", nil)
	}
}

// invalid answers 422 naming the field of a *fieldError.
func invalid(w http.ResponseWriter, err error) {
	var fe *fieldError
	if errors.As(err, &fe) {
		httpserver.WriteError(w, http.StatusUnprocessableEntity, "invalid", fe.Error(), map[string]string{"field": fe.field})
		return
	}
	httpserver.WriteError(w, http.StatusUnprocessableEntity, "invalid", err.Error(), nil)
}

// unavailableError answers 503 with Retry-After.
func unavailableError(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "2")
	httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", msg, nil)
}
