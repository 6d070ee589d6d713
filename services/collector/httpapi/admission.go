package httpapi

import (
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/collector"
)

// Admission by bytes. MaxInFlight bounds requests, but a request's memory
// grows with its decompressed body (the body, the decoded events, the
// encoded message: several times the body), and a gzip body of a few KiB
// expands to the 1 MiB limit. A cap on the decompressed bytes held by the
// requests in flight keeps the collector's memory bounded whatever the
// bodies: each request reserves its bytes as it decompresses them and holds
// them until it is answered; a request that would go past the cap is
// answered 503 with Retry-After.

// admitChunk is the most a request reads (and reserves) at once: what it
// may hold beyond its body when the cap refuses it.
const admitChunk = 32 << 10

// DefaultMaxBodyBytes returns the default cap on decompressed body bytes in
// flight: a thirty-second of the Go memory limit (GOMEMLIMIT), or 16 MiB when
// no limit is set, and never less than 4 MiB (four full requests). A
// request holds five to eight times its body while it is decoded, enriched,
// encoded and copied into its message, and the garbage it leaves can double
// that before a collection: measured, a cap of 32 MiB let the collector's
// RSS reach 600 MiB under a flood of 1 MiB gzip bodies (no GOMEMLIMIT).
func DefaultMaxBodyBytes() int64 {
	limit := debug.SetMemoryLimit(-1)
	if limit <= 0 || limit == math.MaxInt64 {
		return 16 << 20
	}
	return max(limit/32, 4<<20)
}

// admission is the byte budget shared by the requests in flight.
type admission struct {
	limit   int64
	used    atomic.Int64
	refused func() // counts a refusal (metrics); may be nil
}

func newAdmission(limit int64, refused func()) *admission {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes()
	}
	return &admission{limit: limit, refused: refused}
}

// ticket is one request's share of the budget.
type ticket struct {
	a    *admission
	held int64
}

// release gives back everything the request holds.
func (t *ticket) release() {
	if t.held > 0 {
		t.a.used.Add(-t.held)
		t.held = 0
	}
}

// reserve takes n more bytes, or fails with ErrOverloaded.
func (t *ticket) reserve(n int64) error {
	if t.a.used.Add(n) > t.a.limit {
		t.a.used.Add(-n)
		if t.a.refused != nil {
			t.a.refused()
		}
		return fmt.Errorf("%w: more than %d decompressed body bytes in flight", collector.ErrOverloaded, t.a.limit)
	}
	t.held += n
	return nil
}

// reader returns r reading at most admitChunk bytes at a time, each chunk
// reserved before it is read (the unused part given back after).
func (t *ticket) reader(r io.Reader) io.Reader { return &admitReader{r: r, t: t} }

type admitReader struct {
	r io.Reader
	t *ticket
}

func (ar *admitReader) Read(p []byte) (int, error) {
	if len(p) > admitChunk {
		p = p[:admitChunk]
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := ar.t.reserve(int64(len(p))); err != nil {
		return 0, err
	}
	n, err := ar.r.Read(p)
	if unused := int64(len(p) - n); unused > 0 {
		ar.t.a.used.Add(-unused)
		ar.t.held -= unused
	}
	return n, err
}

// registerAdmission exports the bytes held and the cap.
func registerAdmission(reg prometheus.Registerer, a *admission) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "collector_body_bytes_in_flight",
			Help: "Decompressed request body bytes held by requests in flight.",
		}, func() float64 { return float64(a.used.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "collector_body_bytes_in_flight_limit",
			Help: "The cap on collector_body_bytes_in_flight; beyond it requests get 503.",
		}, func() float64 { return float64(a.limit) }),
	)
}
