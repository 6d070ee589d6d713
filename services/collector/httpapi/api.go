// Package httpapi is the collector's HTTP API: POST /v1/events and the
// operational endpoints.
//
// A request goes: request id → in-flight cap (503) → bearer token (401, or
// 503 when it cannot be checked) → per-app rate limit (429) → content type
// and encoding (415) → body limits after decompression (413) → decoding
// (400 malformed JSON, 422 a bad field, 413 an event over 32 KiB or more
// than 500 events) → app binding (403) → enrichment → group commit to the
// broker, with the request's audit record in the same broker transaction →
// 202 once both are durable, 503 with Retry-After when they are not.
//
// Auditing: every accepted request is audited synchronously and atomically
// with its events (one outcome per request; see the README). Rejected requests with 401 or 403 are audited
// asynchronously (best effort, never delaying the answer, at most 200 a
// second); other rejections are only counted in collector_rejections_total.
package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"threatview/api"
	"threatview/collector"
	"threatview/collector/publish"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// Deps are what the API needs.
type Deps struct {
	Auth     collector.Authenticator
	Enricher *collector.Enricher
	// Events carries accepted events to the broker. With auditing on it
	// must be a paired group (publish.NewPaired) that makes each request's
	// audit record durable together with its events.
	Events *publish.Group
	// Shards, when set, carries each request's events instead of Events:
	// to the group of its app's shard (one request is always one app's).
	Shards *publish.Shards
	// Audit carries the best-effort records of refused requests (401, 403);
	// nil turns auditing off.
	Audit    *publish.Group
	Registry *prometheus.Registry
	Metrics  *Metrics
	Checks   map[string]httpserver.Check
	Log      *slog.Logger

	MaxInFlight int
	RateLimit   float64 // requests per second per app; 0 = off
	RateBurst   int
	CORSOrigins []string
	RetryAfter  time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// MaxBodyBytes caps the decompressed body bytes of the requests in
	// flight (beyond it 503); 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// API serves the collector's HTTP endpoints.
type API struct {
	auth       collector.Authenticator
	enricher   *collector.Enricher
	events     *publish.Group
	shards     *publish.Shards
	audit      *publish.Group
	metrics    *Metrics
	log        *slog.Logger
	limiter    *appLimiter
	maxFlight  int64
	inFlight   atomic.Int64
	admit      *admission
	retryAfter time.Duration
	now        func() time.Time
	// rejectAudits bounds the best-effort audit records of refused
	// requests, so a flood of bad tokens cannot flood the audit trail.
	rejectAudits *rate.Limiter
}

// New returns the collector's HTTP handler.
func New(d Deps) http.Handler {
	a := &API{
		auth:       d.Auth,
		enricher:   d.Enricher,
		events:     d.Events,
		shards:     d.Shards,
		audit:      d.Audit,
		metrics:    d.Metrics,
		log:        d.Log,
		maxFlight:  int64(d.MaxInFlight),
		retryAfter: d.RetryAfter,
		now:        d.Now,
		// Up to 200 refused requests a second are audited (bursts of 1000).
		rejectAudits: rate.NewLimiter(200, 1000),
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.retryAfter < time.Second {
		a.retryAfter = time.Second
	}
	if a.maxFlight <= 0 {
		a.maxFlight = 4096
	}
	if d.RateLimit > 0 {
		a.limiter = newAppLimiter(d.RateLimit, d.RateBurst)
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	reg := d.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if a.metrics == nil {
		a.metrics = NewMetrics(reg)
	}
	a.admit = newAdmission(d.MaxBodyBytes, nil)
	registerAdmission(reg, a.admit)

	r := chi.NewRouter()
	r.Use(httpserver.Instrument(reg, "collector"))
	if len(d.CORSOrigins) > 0 {
		r.Use(cors(d.CORSOrigins))
	}
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)
	httpserver.MountOps(r, reg, d.Checks)
	httpserver.MountSpec(r, api.Collector)
	r.Post("/v1/events", a.postEvents)
	return r
}

// request-scoped buffers, reused across requests.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// fragPool holds the buffers a request's events are encoded into (Add
// copies them into the message).
var fragPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *bytes.Buffer {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 2*collector.MaxRequestBytes {
		bufPool.Put(b)
	}
}

func (a *API) postEvents(w http.ResponseWriter, r *http.Request) {
	rid := requestID(r)
	w.Header().Set("X-Request-ID", rid)

	if a.inFlight.Add(1) > a.maxFlight {
		a.inFlight.Add(-1)
		a.reject(w, r, fmt.Errorf("%w: more than %d", collector.ErrOverloaded, a.maxFlight))
		return
	}
	a.metrics.inFlight.Inc()
	defer func() {
		a.inFlight.Add(-1)
		a.metrics.inFlight.Dec()
	}()

	token := httpserver.BearerToken(r)
	if token == "" {
		a.auditRejection(r, rid, collector.Identity{}, http.StatusUnauthorized)
		a.reject(w, r, fmt.Errorf("%w: missing bearer token", collector.ErrUnauthorized))
		return
	}
	id, err := a.auth.Check(r.Context(), token)
	if err != nil {
		if errors.Is(err, collector.ErrUnauthorized) {
			a.auditRejection(r, rid, collector.Identity{}, http.StatusUnauthorized)
			err = fmt.Errorf("%w: invalid or revoked token", collector.ErrUnauthorized)
		}
		a.reject(w, r, err)
		return
	}
	if a.limiter != nil {
		if ok, after := a.limiter.allow(id.AppID, a.now()); !ok {
			a.reject(w, r, &retryError{err: fmt.Errorf("%w: app %s is over its rate limit", collector.ErrRateLimited, id.AppID), after: after})
			return
		}
	}
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		a.reject(w, r, err)
		return
	}

	body := getBuf()
	defer putBuf(body)
	held := &ticket{a: a.admit, app: id.AppID}
	defer held.release()
	if err := readBody(r, body, held); err != nil {
		drainTooLarge(w, r, err)
		a.reject(w, r, err)
		return
	}
	inputs, err := collector.Decode(body.Bytes())
	if err != nil {
		a.reject(w, r, err)
		return
	}
	if err := collector.CheckApp(inputs, id.AppID); err != nil {
		a.auditRejection(r, rid, id, http.StatusForbidden)
		a.reject(w, r, err)
		return
	}

	recv := a.now()
	events := make([]wire.Event, len(inputs))
	req := collector.Request{Identity: id, RemoteAddr: r.RemoteAddr, XFF: r.Header.Get("X-Forwarded-For"), RequestID: rid, ReceivedAt: recv}
	if err := a.enricher.Enrich(req, inputs, events); err != nil {
		a.reject(w, r, err)
		return
	}
	if err := applyIdempotencyKey(r, id.AppID, inputs, events); err != nil {
		a.reject(w, r, err)
		return
	}

	fp := fragPool.Get().(*[]byte)
	frag := collector.AppendRequest((*fp)[:0], events)
	defer func() {
		if cap(frag) <= 2*collector.MaxRequestBytes {
			*fp = frag
			fragPool.Put(fp)
		}
	}()
	// The audit record travels with the events, in the same broker
	// transaction (see the Events group): both are durable or neither, so a
	// 202 always has its audit row and a 503 never leaves events behind.
	var auditFrag []byte
	if a.audit != nil {
		rec := a.auditRecord(r, rid, id, http.StatusAccepted, len(events), recv)
		sum := sha256.Sum256(body.Bytes())
		rec.BodySHA256 = hex.EncodeToString(sum[:])
		ab := getBuf()
		defer putBuf(ab)
		if err := encodeList(ab, []wire.AuditRecord{rec}); err != nil {
			a.reject(w, r, err)
			return
		}
		auditFrag = ab.Bytes()
	}
	group := a.events
	if a.shards != nil {
		group = a.shards.For(id.AppID)
	}
	if err := group.AddPair(frag, len(events), auditFrag).Wait(); err != nil {
		a.reject(w, r, err)
		return
	}
	a.metrics.eventsAccepted.Add(float64(len(events)))
	writeAccepted(w, events)
}

// reject answers err and counts it.
func (a *API) reject(w http.ResponseWriter, r *http.Request, err error) {
	reason := a.writeError(w, r, err)
	a.metrics.rejections.WithLabelValues(reason).Inc()
}

func (a *API) auditRecord(r *http.Request, rid string, id collector.Identity, status, n int, at time.Time) wire.AuditRecord {
	rid7, err := uuid.NewV7()
	recID := ""
	if err == nil {
		recID = rid7.String()
	} else {
		recID = uuid.NewString()
	}
	ipStr := a.enricher.KeptIP(r.RemoteAddr, r.Header.Get("X-Forwarded-For"))
	ua := r.UserAgent()
	if len(ua) > 512 {
		ua = ua[:512]
	}
	return wire.AuditRecord{
		ID:         recID,
		Time:       at.UTC(),
		ActorToken: id.TokenID,
		ActorApp:   id.AppID,
		Action:     "events.collect",
		Resource:   "/v1/events",
		Outcome:    status,
		ClientIP:   ipStr,
		UserAgent:  ua,
		RequestID:  rid,
		EventCount: n,
	}
}

// auditRejection records a refused request (401, 403) without waiting for
// the audit logger: best effort, so a flood of bad tokens cannot slow the
// answers.
func (a *API) auditRejection(r *http.Request, rid string, id collector.Identity, status int) {
	if a.audit == nil {
		return
	}
	if !a.rejectAudits.Allow() {
		a.metrics.auditSkipped.Inc()
		return
	}
	rec := a.auditRecord(r, rid, id, status, 0, a.now())
	b := getBuf()
	if err := encodeList(b, []wire.AuditRecord{rec}); err == nil {
		a.audit.Add(b.Bytes(), 1)
	}
	putBuf(b)
}

// encodeList writes the JSON values of items joined by commas.
func encodeList[T any](buf *bytes.Buffer, items []T) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	for i := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := enc.Encode(&items[i]); err != nil {
			return fmt.Errorf("encode item %d: %w", i, err)
		}
		// Drop Encode's newline so fragments stay compact.
		buf.Truncate(buf.Len() - 1)
	}
	return nil
}

// writeAccepted writes 202 {"accepted": N, "ids": [...]}; ids are UUIDs and
// need no escaping.
func writeAccepted(w http.ResponseWriter, events []wire.Event) {
	b := getBuf()
	defer putBuf(b)
	b.WriteString(`{"accepted":`)
	b.WriteString(strconv.Itoa(len(events)))
	b.WriteString(`,"ids":[`)
	for i := range events {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(events[i].ID)
		b.WriteByte('"')
	}
	b.WriteString("]}\n")
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(b.Bytes())
}

// checkContentType accepts application/json with an optional utf-8 charset.
func checkContentType(ct string) error {
	mt, params, _ := strings.Cut(ct, ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return fmt.Errorf("%w: Content-Type must be application/json, got %q", collector.ErrUnsupportedMediaType, ct)
	}
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(k, "charset") && !strings.EqualFold(strings.Trim(v, `"`), "utf-8") {
			return fmt.Errorf("%w: charset must be utf-8, got %q", collector.ErrUnsupportedMediaType, v)
		}
	}
	return nil
}

// maxWireBytes caps the body as sent (a gzip of incompressible data is a
// little larger than the data).
const maxWireBytes = collector.MaxRequestBytes + 64<<10

var gzipPool sync.Pool

// readBody reads the request body into buf, decompressing gzip, and
// enforces MaxRequestBytes after decompression (so a decompression bomb
// stops after 1 MiB of output). Every decompressed byte is reserved on
// held first (ErrOverloaded past the cap on bytes in flight).
func readBody(r *http.Request, buf *bytes.Buffer, held *ticket) error {
	if r.ContentLength > maxWireBytes {
		return fmt.Errorf("%w: body is larger than %d bytes", collector.ErrTooLarge, collector.MaxRequestBytes)
	}
	wireBody := io.LimitReader(r.Body, maxWireBytes+1)
	var src io.Reader
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		src = wireBody
	case "gzip", "x-gzip":
		zr, _ := gzipPool.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(wireBody)
		} else {
			err = zr.Reset(wireBody)
		}
		if err != nil {
			return fmt.Errorf("%w: invalid gzip body: %v", collector.ErrMalformed, err)
		}
		defer gzipPool.Put(zr)
		src = zr
	default:
		return fmt.Errorf("%w: Content-Encoding %q is not supported (use gzip)", collector.ErrUnsupportedMediaType, enc)
	}
	n, err := buf.ReadFrom(io.LimitReader(held.reader(src), collector.MaxRequestBytes+1))
	switch {
	case errors.Is(err, collector.ErrOverloaded):
		return err
	case n > collector.MaxRequestBytes:
		return fmt.Errorf("%w: body is larger than %d bytes after decompression", collector.ErrTooLarge, collector.MaxRequestBytes)
	case err != nil && (errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF)):
		return fmt.Errorf("%w: invalid gzip body: %v", collector.ErrMalformed, err)
	case err != nil:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: body is larger than %d bytes", collector.ErrTooLarge, collector.MaxRequestBytes)
		}
		return fmt.Errorf("%w: read body: %v", collector.ErrMalformed, err)
	}
	return nil
}

// requestID returns the client's X-Request-ID when it is a sane token, else
// a new one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-ID"); id != "" && len(id) <= 128 && isToken(id) {
		return id
	}
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
