package httpapi

import (
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/collector"
)

// Admission by bytes. MaxInFlight bounds requests, but a request's memory
// grows with its decompressed body (the body, the decoded events, the
// encoded message: several times the body), and a gzip body of a few KiB
// expands to the 1 MiB limit. A cap on the decompressed bytes held by the
// requests in flight keeps the collector's memory bounded whatever the
// bodies: each request reserves its bytes as it decompresses them and holds
// them until it is answered; a request that would go past the cap, or
// past its app's share (half the cap), is answered 503 with Retry-After.

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

// admission is the byte budget shared by the requests in flight. One app
// may hold at most half of it (perApp), so that an app flooding the
// collector with large bodies leaves the other half to the other apps.
type admission struct {
	limit   int64
	perApp  int64
	refused func() // counts a refusal (metrics); may be nil

	mu   sync.Mutex
	used int64
	apps map[string]int64 // bytes held per app; absent when none
}

func newAdmission(limit int64, refused func()) *admission {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes()
	}
	perApp := max(limit/2, min(limit, 2*collector.MaxRequestBytes))
	return &admission{limit: limit, perApp: perApp, refused: refused, apps: map[string]int64{}}
}

// inUse returns the bytes held.
func (a *admission) inUse() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used
}

// ticket is one request's share of the budget.
type ticket struct {
	a    *admission
	app  string
	held int64
}

// release gives back everything the request holds.
func (t *ticket) release() { t.give(t.held) }

// give returns n of the bytes t holds.
func (t *ticket) give(n int64) {
	if n <= 0 {
		return
	}
	a := t.a
	a.mu.Lock()
	a.used -= n
	if left := a.apps[t.app] - n; left > 0 {
		a.apps[t.app] = left
	} else {
		delete(a.apps, t.app)
	}
	a.mu.Unlock()
	t.held -= n
}

// reserve takes n more bytes, or fails with ErrOverloaded.
func (t *ticket) reserve(n int64) error {
	a := t.a
	a.mu.Lock()
	app := a.apps[t.app]
	if a.used+n > a.limit || app+n > a.perApp {
		a.mu.Unlock()
		if a.refused != nil {
			a.refused()
		}
		return fmt.Errorf("%w: more than %d decompressed body bytes in flight (%d for one app)", collector.ErrOverloaded, a.limit, a.perApp)
	}
	a.used += n
	a.apps[t.app] = app + n
	a.mu.Unlock()
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
	ar.t.give(int64(len(p) - n))
	return n, err
}

// registerAdmission exports the bytes held and the cap.
func registerAdmission(reg prometheus.Registerer, a *admission) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "collector_body_bytes_in_flight",
			Help: "Decompressed request body bytes held by requests in flight.",
		}, func() float64 { return float64(a.inUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "collector_body_bytes_in_flight_limit",
			Help: "The cap on collector_body_bytes_in_flight; beyond it requests get 503.",
		}, func() float64 { return float64(a.limit) }),
	)
}
