package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/auditlogger"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/platform/httpserver"
)

// Trail is what the tamper-evidence endpoints read: the audit database, the
// object store outside it (nil when not configured) and the public keys.
type Trail struct {
	DB    *mariadb.Trail
	Ref   trail.Reference
	Keys  trail.Keyring
	Guard func(http.Handler) http.Handler // auditor, admin or the admin key
	// Metrics, when set, count verifications (auditlogger_trail_*).
	Metrics *TrailMetrics
	// running admits one verification at a time per replica: each reads
	// the whole trail, and a burst of them must not starve the database.
	running chan struct{}
}

// TrailMetrics are the verification metrics alerts watch.
type TrailMetrics struct {
	Verifications *prometheus.CounterVec // by result: ok, failed, error
	LastOK        prometheus.Gauge
	Problems      prometheus.Gauge
}

// NewTrailMetrics registers the verification metrics on reg.
func NewTrailMetrics(reg prometheus.Registerer) *TrailMetrics {
	m := &TrailMetrics{
		Verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "auditlogger_trail_verifications_total",
			Help: "Verifications of the audit trail, by result (ok, failed, error).",
		}, []string{"result"}),
		LastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "auditlogger_trail_last_verification_ok",
			Help: "1 when the latest verification found no problem, 0 when it found one.",
		}),
		Problems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "auditlogger_trail_problems",
			Help: "Problems the latest verification found.",
		}),
	}
	reg.MustRegister(m.Verifications, m.LastOK, m.Problems)
	return m
}

// mountTrail adds the tamper-evidence routes.
func (a *API) mountTrail(r chi.Router) {
	t := a.opts.Trail
	if t == nil {
		return
	}
	r.Get("/v1/audit/keys", func(w http.ResponseWriter, r *http.Request) {
		httpserver.WriteJSON(w, http.StatusOK, map[string]any{"keys": t.Keys.List()})
	})
	t.running = make(chan struct{}, 1)
	g := r.With(t.Guard)
	g.Get("/v1/audit/verify", a.verify)
	g.Get("/v1/audit/checkpoints", a.checkpoints)
	g.Get("/v1/audit/checkpoints/consistency", a.consistency)
	g.Get("/v1/audit/{id}/proof", a.proof)
}

func badQuery(w http.ResponseWriter, name, reason string) {
	httpserver.WriteError(w, http.StatusBadRequest, "invalid_query", name+": "+reason, map[string]string{"parameter": name})
}

func (a *API) verify(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var opts trail.Options
	for k := range q {
		if k != "from" && k != "to" {
			badQuery(w, k, "unknown parameter")
			return
		}
	}
	for name, dst := range map[string]*time.Time{"from": &opts.From, "to": &opts.To} {
		if s := q.Get(name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				badQuery(w, name, "not an RFC 3339 time")
				return
			}
			*dst = t
		}
	}
	if !opts.From.IsZero() && !opts.To.IsZero() && !opts.From.Before(opts.To) {
		badQuery(w, "to", "not after from")
		return
	}
	t := a.opts.Trail
	select {
	case t.running <- struct{}{}:
		defer func() { <-t.running }()
	default:
		w.Header().Set("Retry-After", "10")
		httpserver.WriteError(w, http.StatusServiceUnavailable, "busy", "a verification is already running on this replica; retry later", nil)
		return
	}
	rep, err := verifyTrail(r.Context(), t, opts)
	if m := t.Metrics; m != nil {
		switch {
		case err != nil:
			m.Verifications.WithLabelValues("error").Inc()
		case rep.OK:
			m.Verifications.WithLabelValues("ok").Inc()
			m.LastOK.Set(1)
			m.Problems.Set(0)
		default:
			m.Verifications.WithLabelValues("failed").Inc()
			m.LastOK.Set(0)
			m.Problems.Set(float64(len(rep.Problems)))
		}
	}
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, rep)
}

func verifyTrail(ctx context.Context, t *Trail, opts trail.Options) (*trail.Report, error) {
	if err := t.DB.LoadArchived(ctx); err != nil {
		return nil, err
	}
	return trail.Verify(ctx, t.DB, t.Ref, t.Keys, opts)
}

func (a *API) checkpoints(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, limit := int64(0), 100
	for k := range q {
		if k != "after" && k != "limit" {
			badQuery(w, k, "unknown parameter")
			return
		}
	}
	if s := q.Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			badQuery(w, "after", "not a checkpoint number")
			return
		}
		after = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			badQuery(w, "limit", "not a number from 1 to 1000")
			return
		}
		limit = n
	}
	cs, err := a.opts.Trail.DB.CheckpointsPage(r.Context(), after, limit)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	if cs == nil {
		cs = []trail.Checkpoint{}
	}
	latest, err := a.opts.Trail.DB.LatestCheckpoint(r.Context())
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"checkpoints": cs, "latest": latest})
}

// checkpointParam reads a checkpoint number parameter; 0 means the latest.
func (a *API) checkpointParam(w http.ResponseWriter, r *http.Request, name string) (*trail.Checkpoint, bool) {
	db := a.opts.Trail.DB
	var c *trail.Checkpoint
	var err error
	if s := r.URL.Query().Get(name); s != "" {
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || n < 1 {
			badQuery(w, name, "not a checkpoint number")
			return nil, false
		}
		c, err = db.Checkpoint(r.Context(), n)
	} else {
		c, err = db.LatestCheckpoint(r.Context())
	}
	if err != nil {
		a.writeErr(w, r, err)
		return nil, false
	}
	if c == nil {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no such checkpoint", map[string]string{"parameter": name})
		return nil, false
	}
	return c, true
}

func (a *API) consistency(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("from") == "" {
		badQuery(w, "from", "required")
		return
	}
	from, ok := a.checkpointParam(w, r, "from")
	if !ok {
		return
	}
	to, ok := a.checkpointParam(w, r, "to")
	if !ok {
		return
	}
	if from.Size > to.Size {
		badQuery(w, "to", "a smaller tree than from")
		return
	}
	hs, err := a.opts.Trail.DB.ConsistencyProof(r.Context(), from.Size, to.Size)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, trail.ConsistencyProof{From: *from, To: *to, Proof: nonNil(hs)})
}

func nonNil(hs [][]byte) [][]byte {
	if hs == nil {
		return [][]byte{}
	}
	return hs
}

func (a *API) proof(w http.ResponseWriter, r *http.Request) {
	db := a.opts.Trail.DB
	row, err := db.RowByID(r.Context(), chi.URLParam(r, "id"))
	if errors.Is(err, mariadb.ErrNotFound) {
		httpserver.WriteError(w, http.StatusNotFound, "not_found", "no audit row with this id", nil)
		return
	}
	if errors.Is(err, auditlogger.ErrInvalid) {
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_id", err.Error(), nil)
		return
	}
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	c, ok := a.checkpointParam(w, r, "checkpoint")
	if !ok {
		return
	}
	if !row.HasSeq || row.Seq >= c.Size {
		httpserver.WriteError(w, http.StatusConflict, "not_checkpointed",
			"the row is not covered by the checkpoint yet (checkpoints come every few seconds)", nil)
		return
	}
	hs, err := db.InclusionProof(r.Context(), row.Seq, c.Size)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	row.Record.Body = nil
	httpserver.WriteJSON(w, http.StatusOK, trail.InclusionProof{Record: row.Record, Seq: row.Seq, Checkpoint: *c, Proof: nonNil(hs)})
}
