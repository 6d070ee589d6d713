// Package httpapi serves the audit logger's HTTP API: POST /v1/audit
// (internal key) publishes records, GET /v1/audit (role auditor or admin: a
// person's access token from the identity service, or the admin key; see
// platform/authz) pages through stored ones.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/api"
	"threatview/auditlogger"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// Options are the API's limits and keys.
type Options struct {
	InternalKey string
	AdminKey    string
	// People verifies people's access tokens for GET (role auditor or
	// admin); nil accepts the admin key only.
	People          *authz.Verifier
	StoreBody       bool
	MaxRequestBytes int64
	MaxRecords      int
	// Trail serves the tamper-evidence endpoints (nil: not served).
	Trail *Trail
}

// API holds the handlers' dependencies.
type API struct {
	pub   auditlogger.Publisher
	store auditlogger.Store
	opts  Options
	log   *slog.Logger
}

// New returns the API; store may be nil when queries are not served.
func New(pub auditlogger.Publisher, store auditlogger.Store, opts Options, log *slog.Logger) *API {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 4 << 20
	}
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = 1000
	}
	return &API{pub: pub, store: store, opts: opts, log: log}
}

// Handler returns the router with the API and the ops endpoints.
func (a *API) Handler(reg *prometheus.Registry, checks map[string]httpserver.Check) http.Handler {
	r := chi.NewRouter()
	r.Use(httpserver.Instrument(reg, "auditlogger"))
	httpserver.MountOps(r, reg, checks)
	httpserver.MountSpec(r, api.AuditLogger)
	r.With(httpserver.RequireKey(a.opts.InternalKey)).Post("/v1/audit", a.post)
	guard := authz.New(a.opts.People, a.opts.AdminKey, a.log).Require(authz.RoleAuditor, authz.RoleAdmin)
	r.With(guard).Get("/v1/audit", a.get)
	if a.opts.Trail != nil && a.opts.Trail.Guard == nil {
		a.opts.Trail.Guard = guard
	}
	a.mountTrail(r)
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)
	return r
}

// errorTable maps domain errors to statuses; anything else is a 500.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{auditlogger.ErrMalformed, http.StatusBadRequest, "malformed_body"},
	{auditlogger.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{auditlogger.ErrInvalid, http.StatusUnprocessableEntity, "invalid_record"},
	{auditlogger.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

func (a *API) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	for _, e := range errorTable {
		if !errors.Is(err, e.err) {
			continue
		}
		var details any
		var fe *auditlogger.FieldError
		if errors.As(err, &fe) {
			d := map[string]any{"field": fe.Field}
			if fe.Index >= 0 {
				d["index"] = fe.Index
			}
			details = d
		}
		msg := err.Error()
		if e.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
			// The publisher logs each failed broker message; one line per
			// request would flood the log during an outage.
			a.log.Debug("audit request unavailable", "err", err, "path", r.URL.Path)
			msg = "audit trail temporarily unavailable, retry later"
		}
		httpserver.WriteError(w, e.status, e.code, msg, details)
		return
	}
	a.log.Error("audit request failed", "err", err, "path", r.URL.Path)
	httpserver.WriteError(w, http.StatusInternalServerError, "internal", "internal error", nil)
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (a *API) post(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			httpserver.WriteError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json", nil)
			return
		}
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, a.opts.MaxRequestBytes)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			a.writeErr(w, r, fmt.Errorf("%w: body above %d bytes", auditlogger.ErrTooLarge, a.opts.MaxRequestBytes))
			return
		}
		a.writeErr(w, r, fmt.Errorf("%w: read body: %v", auditlogger.ErrMalformed, err))
		return
	}
	records, err := DecodePost(buf.Bytes(), a.opts.MaxRecords, a.opts.StoreBody)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	if err := a.pub.Publish(r.Context(), records); err != nil {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return // the caller left; it will retry
		}
		a.writeErr(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusAccepted, accepted{Accepted: len(records)})
}

type accepted struct {
	Accepted int `json:"accepted"`
}

// postBody accepts a batch ({"v":1,"records":[...]}) or one bare record.
type postBody struct {
	V       *int                `json:"v"`
	Records *[]wire.AuditRecord `json:"records"`
	wire.AuditRecord
}

// DecodePost parses a POST /v1/audit body, normalizes its records (the body
// is dropped unless keepBody) and validates them. Errors wrap ErrMalformed
// (not JSON of the right shape), ErrInvalid (a *FieldError naming field and
// index) or ErrTooLarge (more than maxRecords).
func DecodePost(data []byte, maxRecords int, keepBody bool) ([]wire.AuditRecord, error) {
	// encoding/json would turn invalid UTF-8 into U+FFFD silently.
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: the body is not valid UTF-8", auditlogger.ErrMalformed)
	}
	var pb postBody
	if err := json.Unmarshal(data, &pb); err != nil {
		var ute *json.UnmarshalTypeError
		var pe *time.ParseError
		switch {
		case errors.As(err, &ute) && ute.Field != "":
			field := strings.TrimPrefix(ute.Field, "AuditRecord.")
			return nil, &auditlogger.FieldError{Index: -1, Field: field, Reason: "wrong type, want " + ute.Type.String()}
		case errors.As(err, &pe):
			return nil, &auditlogger.FieldError{Index: -1, Field: "time", Reason: "not an RFC 3339 time"}
		default:
			return nil, fmt.Errorf("%w: body is not a JSON audit record or batch: %v", auditlogger.ErrMalformed, err)
		}
	}
	var records []wire.AuditRecord
	index := 0
	if pb.V != nil || pb.Records != nil {
		switch {
		case pb.V != nil && *pb.V != wire.Version:
			return nil, &auditlogger.FieldError{Index: -1, Field: "v", Reason: "version " + strconv.Itoa(*pb.V) + ", want " + strconv.Itoa(wire.Version)}
		case pb.ID != "" || pb.Action != "" || !pb.Time.IsZero():
			return nil, &auditlogger.FieldError{Index: -1, Field: "records", Reason: "a batch carries its records under records only"}
		case pb.Records == nil || len(*pb.Records) == 0:
			return nil, &auditlogger.FieldError{Index: -1, Field: "records", Reason: "empty"}
		case len(*pb.Records) > maxRecords:
			return nil, fmt.Errorf("%w: %d records, at most %d", auditlogger.ErrTooLarge, len(*pb.Records), maxRecords)
		}
		records = *pb.Records
	} else {
		records = []wire.AuditRecord{pb.AuditRecord}
		index = -1
	}
	for i := range records {
		auditlogger.Normalize(&records[i], keepBody)
		at := i
		if index < 0 {
			at = -1
		}
		if err := auditlogger.Validate(&records[i], at); err != nil {
			return nil, err
		}
	}
	return records, nil
}

// queryParams are the parameters GET /v1/audit accepts.
var queryParams = map[string]bool{"from": true, "to": true, "actor": true, "action": true, "app_id": true, "limit": true, "cursor": true}

type page struct {
	Records    []wire.AuditRecord `json:"records"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	f, err := ParseQuery(r.URL.Query())
	if err != nil {
		var fe *auditlogger.FieldError
		details := any(nil)
		if errors.As(err, &fe) {
			details = map[string]string{"parameter": fe.Field}
		}
		httpserver.WriteError(w, http.StatusBadRequest, "invalid_query", err.Error(), details)
		return
	}
	if a.store == nil {
		a.writeErr(w, r, fmt.Errorf("%w: no audit database configured", auditlogger.ErrUnavailable))
		return
	}
	p, err := a.store.Query(r.Context(), f)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	out := page{Records: p.Records}
	if p.Next != nil {
		out.NextCursor = p.Next.Encode()
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

// ParseQuery reads the filter of GET /v1/audit; errors are *FieldError
// naming the parameter.
func ParseQuery(q map[string][]string) (auditlogger.Filter, error) {
	bad := func(name, reason string) error {
		return &auditlogger.FieldError{Index: -1, Field: name, Reason: reason}
	}
	for k, v := range q {
		if !queryParams[k] {
			return auditlogger.Filter{}, bad(k, "unknown parameter")
		}
		if len(v) > 1 {
			return auditlogger.Filter{}, bad(k, "given more than once")
		}
	}
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	f := auditlogger.Filter{Actor: get("actor"), Action: get("action"), AppID: get("app_id"), Limit: auditlogger.DefaultLimit}
	var err error
	if s := get("from"); s != "" {
		if f.From, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return f, bad("from", "not an RFC 3339 time")
		}
	}
	if s := get("to"); s != "" {
		if f.To, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return f, bad("to", "not an RFC 3339 time")
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, bad("to", "not after from")
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > auditlogger.MaxLimit {
			return f, bad("limit", fmt.Sprintf("not a number from 1 to %d", auditlogger.MaxLimit))
		}
		f.Limit = n
	}
	if s := get("cursor"); s != "" {
		c, err := auditlogger.DecodeCursor(s)
		if err != nil {
			return f, err
		}
		f.After = &c
	}
	return f, nil
}
