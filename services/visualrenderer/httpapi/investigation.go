package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
	"threatview/visualrenderer"
)

// Auditor records who looked up which subject and taxonomy changes
// (platform/auditclient.Client).
type Auditor interface {
	Audit(ctx context.Context, rec wire.AuditRecord) error
}

// Investigation is what the read API needs besides the store: the user id
// keys (nil: user_id searches take a pseudonym only) and the auditor (nil:
// searches and changes are logged, not audited).
type Investigation struct {
	Store  visualrenderer.Investigator
	Users  *wire.Pseudonymizer
	Audit  Auditor
	Poll   time.Duration // the live stream's poll interval (500 ms)
	Window time.Duration // how far back a poll looks for late commits (10 s)
}

// mountInvestigation adds the read API's routes (behind auth.API) when New
// was given an Investigation.
func (h *Handler) mountInvestigation(r chi.Router) {
	if h.inv == nil {
		return
	}
	r.Get("/v1/events", h.searchEvents)
	r.Get("/v1/events/stream", h.streamEvents)
	r.Get("/v1/timelines/{kind}/{id}", h.timeline)
	r.Get("/v1/overview", h.overviewNumbers)
	r.Get("/v1/map", h.mapData)
	r.Get("/v1/reports/threats/{type}", h.threatReport)
	r.Get("/v1/taxonomy", h.taxonomy)
	r.Put("/v1/taxonomy/{type}", h.setThreatClass)
}

// writeInvErr maps the read API's errors; the rest go to writeErr.
func (h *Handler) writeInvErr(w http.ResponseWriter, r *http.Request, err error) {
	var pe *visualrenderer.ParamError
	switch {
	case errors.As(err, &pe):
		httpserver.WriteError(w, http.StatusUnprocessableEntity, "invalid_parameter", pe.Error(), map[string]any{"parameter": pe.Param})
	case errors.Is(err, visualrenderer.ErrNotFound):
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no events of this subject", nil)
	default:
		h.writeErr(w, r, err)
	}
}

// audit records a read of personal data or a change, by r's caller.
func (h *Handler) audit(ctx context.Context, r *http.Request, action, resource string, status int, body any) error {
	if h.inv.Audit == nil {
		return nil
	}
	c, _ := authz.FromContext(r.Context())
	b, _ := json.Marshal(body)
	rec := wire.AuditRecord{ID: uuid.Must(uuid.NewV7()).String(), Time: h.now().UTC(), ActorToken: c.Actor(),
		Action: action, Resource: resource, Outcome: status, ClientIP: clientNet(r),
		UserAgent: trimTo(r.UserAgent(), 256), RequestID: trimTo(r.Header.Get("X-Request-ID"), 64), Body: b}
	if err := h.inv.Audit.Audit(ctx, rec); err != nil {
		return fmt.Errorf("audit %s: %w: %w", action, visualrenderer.ErrUnavailable, err)
	}
	return nil
}

// subject is what a search looked up, for its audit record: the device,
// session and user pseudonym (never a raw user id).
func subject(f visualrenderer.EventFilter) map[string]any {
	s := map[string]any{}
	for k, v := range map[string]string{"app_id": f.AppID, "device_id": f.DeviceID, "session_id": f.SessionID,
		"type": f.Type, "threat": f.Threat, "category": f.Category, "country": f.Country, "os": f.OS} {
		if v != "" {
			s[k] = v
		}
	}
	if len(f.Users) > 0 {
		s["user_pseudonym"] = f.Users[0]
	}
	return s
}

// looksUpSomeone reports whether a search names a person's subject (a
// device, session or user): those are audited.
func looksUpSomeone(f visualrenderer.EventFilter) bool {
	return f.DeviceID != "" || f.SessionID != "" || len(f.Users) > 0
}

func (h *Handler) searchEvents(w http.ResponseWriter, r *http.Request) {
	f, err := visualrenderer.ParseEventFilter(r.URL.Query(), h.now(), h.inv.Users, false)
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	if looksUpSomeone(f) {
		if err := h.audit(r.Context(), r, "events.search", "/v1/events", http.StatusOK, subject(f)); err != nil {
			h.writeInvErr(w, r, err)
			return
		}
	}
	tax, err := h.inv.Store.Taxonomy(r.Context())
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	page, err := h.inv.Store.SearchEvents(r.Context(), f, tax)
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpserver.WriteJSON(w, http.StatusOK, page)
}

// streamEvents sends newly stored events matching the filter as server-sent
// events, one JSON event per data: line. It polls every Poll, looking back
// Window for events committed after later-received ones (the processor
// writes in batches), and remembers what it sent within the window.
func (h *Handler) streamEvents(w http.ResponseWriter, r *http.Request) {
	f, err := visualrenderer.ParseEventFilter(r.URL.Query(), h.now(), h.inv.Users, true)
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	if looksUpSomeone(f) {
		if err := h.audit(r.Context(), r, "events.stream", "/v1/events/stream", http.StatusOK, subject(f)); err != nil {
			h.writeInvErr(w, r, err)
			return
		}
	}
	// The server's write timeout would end the stream: this response has
	// none (the client or the server's shutdown ends it).
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	poll, window := h.inv.Poll, h.inv.Window
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	if window <= 0 {
		window = 10 * time.Second
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": stream of stored events\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	start := h.now().UTC()
	sent := map[string]time.Time{} // event id -> received_at, within the window
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		since := h.now().UTC().Add(-window)
		if since.Before(start.Add(-time.Second)) {
			since = start.Add(-time.Second)
		}
		tax, err := h.inv.Store.Taxonomy(r.Context())
		var evs []visualrenderer.Event
		if err == nil {
			evs, err = h.inv.Store.EventsSince(r.Context(), f, since, 1000, tax)
		}
		if err != nil {
			if r.Context().Err() == nil {
				h.log.Warn("event stream poll failed", "err", err)
			}
		}
		for i := range evs {
			e := &evs[i]
			if _, dup := sent[e.EventID]; dup || e.ReceivedAt.Before(start.Add(-time.Second)) {
				continue
			}
			sent[e.EventID] = e.ReceivedAt
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", e.EventID, b); err != nil {
				return
			}
		}
		for id, at := range sent {
			if at.Before(since) {
				delete(sent, id)
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

func (h *Handler) timeline(w http.ResponseWriter, r *http.Request) {
	kind, id := chi.URLParam(r, "kind"), chi.URLParam(r, "id")
	if kind != "device" && kind != "session" && kind != "user" {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "timelines are /v1/timelines/{device|session|user}/{id}", nil)
		return
	}
	if id == "" || len(id) > 256 {
		h.writeInvErr(w, r, &visualrenderer.ParamError{Param: "id", Message: "want 1 to 256 bytes"})
		return
	}
	appID := r.URL.Query().Get("app_id")
	ids := []string{id}
	if kind == "user" && !wire.IsPseudonym(id) {
		if h.inv.Users == nil {
			h.writeInvErr(w, r, &visualrenderer.ParamError{Param: "id", Message: "no user id key is configured: give the pseudonym"})
			return
		}
		ids = h.inv.Users.All(id)
	}
	shown := ids[0]
	if err := h.audit(r.Context(), r, "timeline.read", "/v1/timelines/"+kind, http.StatusOK,
		map[string]any{"kind": kind, "subject": shown, "app_id": appID}); err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	tax, err := h.inv.Store.Taxonomy(r.Context())
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	t, err := h.inv.Store.Timeline(r.Context(), kind, ids, appID, tax)
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	t.ID = shown
	w.Header().Set("Cache-Control", "no-store")
	httpserver.WriteJSON(w, http.StatusOK, t)
}

func (h *Handler) overviewNumbers(w http.ResponseWriter, r *http.Request) {
	h.rollup(w, r, func(ctx context.Context, q visualrenderer.RollupQuery) (any, error) {
		return h.inv.Store.Overview(ctx, q)
	})
}

func (h *Handler) mapData(w http.ResponseWriter, r *http.Request) {
	h.rollup(w, r, func(ctx context.Context, q visualrenderer.RollupQuery) (any, error) { return h.inv.Store.Map(ctx, q) })
}

// rollup answers a read of the rollups: the query parsed, read, written.
func (h *Handler) rollup(w http.ResponseWriter, r *http.Request, read func(context.Context, visualrenderer.RollupQuery) (any, error)) {
	q, err := visualrenderer.ParseRollupQuery(r.URL.Query(), h.now())
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	v, err := read(r.Context(), q)
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "private, max-age=10")
	httpserver.WriteJSON(w, http.StatusOK, v)
}

func (h *Handler) threatReport(w http.ResponseWriter, r *http.Request) {
	typ := chi.URLParam(r, "type")
	if typ == "" || len(typ) > 128 {
		h.writeInvErr(w, r, &visualrenderer.ParamError{Param: "type", Message: "want 1 to 128 bytes"})
		return
	}
	q, err := visualrenderer.ParseRollupQuery(r.URL.Query(), h.now())
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	tax, err := h.inv.Store.Taxonomy(r.Context())
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	// A category's report covers every type of it (by the taxonomy now).
	category := tax.Class(typ).Category
	if visualrenderer.IsCategory(typ) {
		category = typ
	}
	rep, err := h.inv.Store.ThreatReport(r.Context(), q, tax.Select(typ))
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	rep.Threat, rep.Category = typ, category
	w.Header().Set("Cache-Control", "private, max-age=10")
	httpserver.WriteJSON(w, http.StatusOK, rep)
}

func (h *Handler) taxonomy(w http.ResponseWriter, r *http.Request) {
	tax, err := h.inv.Store.Taxonomy(r.Context())
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	out := struct {
		Threats    []visualrenderer.ThreatClass `json:"threats"`
		Categories []string                     `json:"categories"`
		Severities []string                     `json:"severities"`
	}{Threats: make([]visualrenderer.ThreatClass, 0, len(tax)), Categories: visualrenderer.Categories, Severities: visualrenderer.Severities}
	for _, c := range tax {
		out.Threats = append(out.Threats, c)
	}
	sort.Slice(out.Threats, func(i, j int) bool { return out.Threats[i].Type < out.Threats[j].Type })
	httpserver.WriteJSON(w, http.StatusOK, out)
}

// setThreatClass answers PUT /v1/taxonomy/{type} {"category", "severity"}
// (role admin), audited before the change commits.
func (h *Handler) setThreatClass(w http.ResponseWriter, r *http.Request) {
	c, _ := authz.FromContext(r.Context())
	if !c.HasAny(authz.RoleAdmin) {
		httpserver.WriteError(w, http.StatusForbidden, "forbidden", "changing the taxonomy needs role admin", nil)
		return
	}
	typ := chi.URLParam(r, "type")
	if typ == "" || len(typ) > 128 {
		h.writeInvErr(w, r, &visualrenderer.ParamError{Param: "type", Message: "want 1 to 128 bytes"})
		return
	}
	var body struct {
		Category string `json:"category"`
		Severity string `json:"severity"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		httpserver.WriteError(w, http.StatusBadRequest, "malformed", "want a JSON object {\"category\", \"severity\"}", nil)
		return
	}
	switch {
	case !visualrenderer.IsCategory(body.Category):
		h.writeInvErr(w, r, &visualrenderer.ParamError{Param: "category", Message: "want one of " + strings.Join(visualrenderer.Categories, ", ")})
		return
	case !contains(visualrenderer.Severities, body.Severity):
		h.writeInvErr(w, r, &visualrenderer.ParamError{Param: "severity", Message: "want one of " + strings.Join(visualrenderer.Severities, ", ")})
		return
	}
	tc := visualrenderer.ThreatClass{Type: typ, Category: body.Category, Severity: body.Severity}
	err := h.inv.Store.SetThreatClass(r.Context(), tc, c.Actor(), func(ctx context.Context) error {
		return h.audit(ctx, r, "taxonomy.set", "/v1/taxonomy/"+url.PathEscape(typ), http.StatusOK, tc)
	})
	if err != nil {
		h.writeInvErr(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, tc)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// clientNet is the caller's /24 or /48: no full address in an audit record.
func clientNet(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return ""
	case ip.To4() != nil:
		return ip.Mask(net.CIDRMask(24, 32)).String()
	default:
		return ip.Mask(net.CIDRMask(48, 128)).String()
	}
}

func trimTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
