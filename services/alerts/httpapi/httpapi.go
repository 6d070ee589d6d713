// Package httpapi is the alerts service's HTTP API: alert rules, their
// history and dead letters, and SIEM forwarders (DESIGN.md, Alerts and
// Forwarding to a SIEM), behind platform/authz, every change audited.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/api"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// Store is what the API needs of the database (postgres.Store).
type Store interface {
	CreateRule(ctx context.Context, r *alerts.Rule, audit func(context.Context) error) error
	Rules(ctx context.Context) ([]alerts.Rule, error)
	Rule(ctx context.Context, id string) (alerts.Rule, error)
	DeleteRule(ctx context.Context, id string, audit func(context.Context) error) error
	SilenceRule(ctx context.Context, id string, until *time.Time, audit func(context.Context) error) error
	History(ctx context.Context, id string, limit int) ([]alerts.Transition, error)
	Notifications(ctx context.Context, status string, limit int) ([]alerts.Transition, error)
	CreateForwarder(ctx context.Context, f *alerts.Forwarder, audit func(context.Context) error) error
	Forwarders(ctx context.Context) ([]alerts.Forwarder, error)
	DeleteForwarder(ctx context.Context, id string, audit func(context.Context) error) error
	ForwarderStatus(ctx context.Context, id string) (alerts.ForwarderStatus, error)
}

// Auditor records an admin action (platform/auditclient.Client).
type Auditor interface {
	Audit(ctx context.Context, rec wire.AuditRecord) error
}

// maxBody bounds a request body (a forwarder's CA bundle is the largest
// field, 64 KiB).
const maxBody = 128 << 10

type handler struct {
	st    Store
	audit Auditor
	log   *slog.Logger
	now   func() time.Time
	dest  Destinations
}

// Destinations is where rules and forwarders may send.
type Destinations struct {
	// Guard refuses webhook, Slack, syslog and HTTP destinations on
	// private, loopback and link-local addresses the operator did not
	// allow (nil: egress.NewGuard(nil), which allows none of them).
	Guard *egress.Guard
	// S3Buckets are the buckets s3 forwarders may write to; none: no s3
	// forwarder can be created.
	S3Buckets []string
}

// New returns the service's routes. audit may be nil only in tests that
// change nothing.
func New(st Store, auth *authz.Authenticator, audit Auditor, dest Destinations, reg *prometheus.Registry, checks map[string]httpserver.Check, log *slog.Logger) http.Handler {
	if dest.Guard == nil {
		dest.Guard = egress.NewGuard(nil)
	}
	h := &handler{st: st, audit: audit, log: log, now: time.Now, dest: dest}
	r := chi.NewRouter()
	r.Use(httpserver.Instrument(reg, "alerts"))
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)
	httpserver.MountOps(r, reg, checks)
	httpserver.MountSpec(r, api.Alerts)
	read := auth.Require(authz.RoleAnalyst)
	change := auth.Require(authz.RoleAdmin)
	r.With(read).Get("/v1/alert-rules", h.listRules)
	r.With(change).Post("/v1/alert-rules", h.createRule)
	r.With(read).Get("/v1/alert-rules/{id}", h.getRule)
	r.With(change).Delete("/v1/alert-rules/{id}", h.deleteRule)
	r.With(change).Put("/v1/alert-rules/{id}/silence", h.silenceRule)
	r.With(read).Get("/v1/alert-rules/{id}/history", h.history)
	r.With(read).Get("/v1/alert-notifications", h.notifications)
	r.With(read).Get("/v1/forwarders", h.listForwarders)
	r.With(change).Post("/v1/forwarders", h.createForwarder)
	r.With(change).Delete("/v1/forwarders/{id}", h.deleteForwarder)
	r.With(read).Get("/v1/forwarders/{id}/status", h.forwarderStatus)
	return r
}

// writeErr is the one error→status table.
func writeErr(w http.ResponseWriter, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, alerts.ErrInvalid):
		msg := err.Error()
		if i := len(alerts.ErrInvalid.Error()) + 2; len(msg) > i && msg[:i-2] == alerts.ErrInvalid.Error() {
			msg = msg[i:]
		}
		httpserver.WriteError(w, http.StatusUnprocessableEntity, "invalid", msg, nil)
	case errors.Is(err, alerts.ErrNotFound):
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no such rule or forwarder", nil)
	case errors.Is(err, alerts.ErrUnavailable):
		log.Warn("request failed", "err", err)
		w.Header().Set("Retry-After", "5")
		httpserver.WriteError(w, http.StatusServiceUnavailable, "unavailable", "the database or the audit logger is unavailable; nothing was changed", nil)
	default:
		log.Error("request failed", "err", err)
		httpserver.WriteError(w, http.StatusInternalServerError, "internal", "internal error", nil)
	}
}

func (h *handler) id(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no such rule or forwarder", nil)
		return "", false
	}
	return id, true
}

// auditFor returns the audit of one change by r's caller, posted before
// the change commits.
func (h *handler) auditFor(r *http.Request, action, resource string, status int, body any) func(context.Context) error {
	return func(ctx context.Context) error {
		c, _ := authz.FromContext(r.Context())
		b, _ := json.Marshal(body)
		rec := wire.AuditRecord{ID: uuid.Must(uuid.NewV7()).String(), Time: h.now().UTC(), ActorToken: c.Actor(),
			Action: action, Resource: resource, Outcome: status, ClientIP: clientNet(r), UserAgent: trim(r.UserAgent(), 256),
			RequestID: trim(r.Header.Get("X-Request-ID"), 64), Body: b}
		if err := h.audit.Audit(ctx, rec); err != nil {
			return errors.Join(alerts.ErrUnavailable, err)
		}
		return nil
	}
}

// clientNet is the caller's /24 or /48: no full address in an audit record.
func clientNet(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	return httpserver.PrivateAddr(a)
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (h *handler) listRules(w http.ResponseWriter, r *http.Request) {
	rules, err := h.st.Rules(r.Context())
	if err != nil {
		writeErr(w, h.log, err)
		return
	}
	out := make([]alerts.Rule, 0, len(rules))
	for _, x := range rules {
		out = append(out, x.Public())
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"rules": out})
}

func (h *handler) getRule(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	rule, err := h.st.Rule(r.Context(), id)
	if err != nil {
		writeErr(w, h.log, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, rule.Public())
}

// ruleInput is the body of POST /v1/alert-rules.
type ruleInput struct {
	Name          string         `json:"name"`
	AppID         string         `json:"app_id"`
	Threat        string         `json:"threat"`
	Country       string         `json:"country"`
	OS            string         `json:"os"`
	Kind          string         `json:"kind"`
	WindowSeconds int            `json:"window_seconds"`
	Threshold     int64          `json:"threshold"`
	Factor        float64        `json:"factor"`
	Channel       alerts.Channel `json:"channel"`
	SilencedUntil *time.Time     `json:"silenced_until"`
}

func (h *handler) createRule(w http.ResponseWriter, r *http.Request) {
	var in ruleInput
	if !httpserver.DecodeJSON(w, r, &in, maxBody, nil) {
		return
	}
	c, _ := authz.FromContext(r.Context())
	rule := alerts.Rule{ID: uuid.Must(uuid.NewV7()).String(), Name: in.Name, AppID: in.AppID, Threat: in.Threat,
		Country: in.Country, OS: in.OS, Kind: in.Kind, WindowSeconds: in.WindowSeconds, Threshold: in.Threshold, Factor: in.Factor,
		Channel: in.Channel, SilencedUntil: in.SilencedUntil, CreatedBy: c.Actor()}
	if err := rule.Validate(); err != nil {
		writeErr(w, h.log, err)
		return
	}
	if rule.Channel.URL != "" {
		if err := h.checkURL(r.Context(), "channel.url", rule.Channel.URL); err != nil {
			writeErr(w, h.log, err)
			return
		}
	}
	pub := rule.Public()
	if err := h.st.CreateRule(r.Context(), &rule, h.auditFor(r, "alerts.rule.create", "alert-rules/"+rule.ID, http.StatusCreated, pub)); err != nil {
		writeErr(w, h.log, err)
		return
	}
	w.Header().Set("Location", "/v1/alert-rules/"+rule.ID)
	httpserver.WriteJSON(w, http.StatusCreated, rule.Public())
}

// checkURL refuses a destination (a validated URL) on an address the
// egress policy does not allow. The dial checks it again on the address
// it resolves to then.
func (h *handler) checkURL(ctx context.Context, field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %s is not a URL", alerts.ErrInvalid, field)
	}
	if u.Scheme == "s3" {
		if !slices.Contains(h.dest.S3Buckets, u.Host) {
			return fmt.Errorf("%w: %s: bucket %s is not one of ALERTS_S3_BUCKETS", alerts.ErrInvalid, field, u.Host)
		}
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := h.dest.Guard.Check(ctx, u.Hostname(), port); err != nil {
		return fmt.Errorf("%w: %s: %s (the operator's ALERTS_EGRESS_ALLOW can allow it)", alerts.ErrInvalid, field, err)
	}
	return nil
}

func (h *handler) deleteRule(w http.ResponseWriter, r *http.Request) {
	h.remove(w, r, "alerts.rule.delete", "alert-rules/", h.st.DeleteRule)
}

// remove deletes the rule or forwarder in the path, audited.
func (h *handler) remove(w http.ResponseWriter, r *http.Request, action, prefix string,
	del func(ctx context.Context, id string, audit func(context.Context) error) error) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	if err := del(r.Context(), id, h.auditFor(r, action, prefix+id, http.StatusNoContent, nil)); err != nil {
		writeErr(w, h.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) silenceRule(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	var in struct {
		Until *time.Time `json:"until"`
	}
	if !httpserver.DecodeJSON(w, r, &in, 1024, nil) {
		return
	}
	if in.Until != nil && in.Until.After(h.now().Add(366*24*time.Hour)) {
		writeErr(w, h.log, errors.Join(alerts.ErrInvalid, errors.New("until must be within a year")))
		return
	}
	if err := h.st.SilenceRule(r.Context(), id, in.Until, h.auditFor(r, "alerts.rule.silence", "alert-rules/"+id, http.StatusOK, in)); err != nil {
		writeErr(w, h.log, err)
		return
	}
	rule, err := h.st.Rule(r.Context(), id)
	if err != nil {
		writeErr(w, h.log, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, rule.Public())
}

func limitParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 100, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_query", "limit must be 1 to 1000", nil)
		return 0, false
	}
	return n, true
}

func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	limit, ok := limitParam(w, r)
	if !ok {
		return
	}
	ts, err := h.st.History(r.Context(), id, limit)
	if err != nil {
		writeErr(w, h.log, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"rule_id": id, "transitions": ts})
}

func (h *handler) notifications(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status == "" {
		status = "dead"
	}
	if status != "dead" && status != "pending" && status != "sent" {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_query", "status must be dead, pending or sent", nil)
		return
	}
	limit, ok := limitParam(w, r)
	if !ok {
		return
	}
	ts, err := h.st.Notifications(r.Context(), status, limit)
	if err != nil {
		writeErr(w, h.log, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"status": status, "notifications": ts})
}

// forwarderInput is the body of POST /v1/forwarders.
type forwarderInput struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	URL     string   `json:"url"`
	Format  string   `json:"format"`
	AppIDs  []string `json:"app_ids"`
	Threats []string `json:"threats"`
	CAPEM   string   `json:"ca_pem"`
	// SecretHeader is write-only: its value is never shown again nor
	// audited (its name is).
	SecretHeader *alerts.SecretHeader `json:"secret_header"`
}

func (h *handler) listForwarders(w http.ResponseWriter, r *http.Request) {
	fs, err := h.st.Forwarders(r.Context())
	if err != nil {
		writeErr(w, h.log, err)
		return
	}
	out := make([]alerts.Forwarder, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.Public())
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"forwarders": out})
}

func (h *handler) createForwarder(w http.ResponseWriter, r *http.Request) {
	var in forwarderInput
	if !httpserver.DecodeJSON(w, r, &in, maxBody, nil) {
		return
	}
	c, _ := authz.FromContext(r.Context())
	f := alerts.Forwarder{ID: uuid.Must(uuid.NewV7()).String(), Name: in.Name, Type: in.Type, URL: in.URL,
		Format: in.Format, AppIDs: in.AppIDs, Threats: in.Threats, CAPEM: in.CAPEM, SecretHeader: in.SecretHeader, CreatedBy: c.Actor()}
	if err := f.Validate(); err != nil {
		writeErr(w, h.log, err)
		return
	}
	if err := h.checkURL(r.Context(), "url", f.URL); err != nil {
		writeErr(w, h.log, err)
		return
	}
	rec := f.Public()
	rec.CAPEM = ""
	if err := h.st.CreateForwarder(r.Context(), &f, h.auditFor(r, "alerts.forwarder.create", "forwarders/"+f.ID, http.StatusCreated, rec)); err != nil {
		writeErr(w, h.log, err)
		return
	}
	w.Header().Set("Location", "/v1/forwarders/"+f.ID)
	httpserver.WriteJSON(w, http.StatusCreated, f.Public())
}

func (h *handler) deleteForwarder(w http.ResponseWriter, r *http.Request) {
	h.remove(w, r, "alerts.forwarder.delete", "forwarders/", h.st.DeleteForwarder)
}

func (h *handler) forwarderStatus(w http.ResponseWriter, r *http.Request) {
	id, ok := h.id(w, r)
	if !ok {
		return
	}
	st, err := h.st.ForwarderStatus(r.Context(), id)
	if err != nil {
		writeErr(w, h.log, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, st)
}
