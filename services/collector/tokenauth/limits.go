package tokenauth

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

type clientKey struct{}

// WithClient returns ctx carrying the client address whose lookups of
// unknown tokens share one cap. IPv6 addresses share it per /64, the block
// one subscriber usually holds.
func WithClient(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, clientKey{}, clientOf(addr))
}

func clientOf(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if addr.Is6() {
		if p, err := addr.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return addr
}

// maxClients bounds the per-client limiters kept; past it they are all
// forgotten (the global cap still holds).
const maxClients = 10_000

// LimitedError is the error of a check refused by a lookup cap: the token
// was not looked up, so nothing is known about it. It wraps
// ErrLookupLimited (never ErrUnauthorized) and says when to try again.
type LimitedError struct {
	// After is when a lookup would be admitted again (at least a second).
	After time.Duration
	// InFlight is true when the cap on lookups at once refused it (the
	// tokens service is slow), false for a rate cap.
	InFlight bool
}

func (e *LimitedError) Error() string {
	what := "lookup rate"
	if e.InFlight {
		what = "lookups in flight"
	}
	return fmt.Sprintf("%v (%s); retry in %s", ErrLookupLimited, what, e.After)
}

// Unwrap returns ErrLookupLimited.
func (e *LimitedError) Unwrap() error { return ErrLookupLimited }

// RetryAfter is how long the client should wait (the collector's
// Retry-After).
func (e *LimitedError) RetryAfter() time.Duration { return e.After }

// limits caps the lookups of tokens the cache does not know as active,
// with token buckets from golang.org/x/time/rate.
type limits struct {
	cfg      Config
	inFlight atomic.Int64
	global   *rate.Limiter
	mu       sync.Mutex
	clients  map[netip.Addr]*rate.Limiter
}

func (l *limits) init(cfg Config) {
	l.cfg = cfg
	l.global = rate.NewLimiter(rate.Limit(cfg.UnknownRate), cfg.UnknownBurst)
	l.clients = make(map[netip.Addr]*rate.Limiter)
}

func (l *limits) client(addr netip.Addr) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.clients[addr]
	if lim == nil {
		if len(l.clients) >= maxClients {
			clear(l.clients)
		}
		lim = rate.NewLimiter(rate.Limit(l.cfg.ClientRate), l.cfg.ClientBurst)
		l.clients[addr] = lim
	}
	return lim
}

// admit returns nil when one more lookup may start now; the caller then
// calls done once the lookup is over. Otherwise it returns a *LimitedError
// saying when a lookup would be admitted.
func (l *limits) admit(ctx context.Context, now time.Time) *LimitedError {
	if l.inFlight.Add(1) > int64(l.cfg.UnknownInFlight) {
		l.inFlight.Add(-1)
		return &LimitedError{After: time.Second, InFlight: true}
	}
	var cr *rate.Reservation
	if addr, ok := ctx.Value(clientKey{}).(netip.Addr); ok {
		// The client's own cap first, so a client over it does not use up
		// the global one.
		cr = l.client(addr).ReserveN(now, 1)
		if d := cr.DelayFrom(now); d > 0 {
			cr.CancelAt(now)
			l.inFlight.Add(-1)
			return &LimitedError{After: atLeastSecond(d)}
		}
	}
	gr := l.global.ReserveN(now, 1)
	if d := gr.DelayFrom(now); d > 0 {
		gr.CancelAt(now)
		if cr != nil {
			cr.CancelAt(now) // not spent: give it back
		}
		l.inFlight.Add(-1)
		return &LimitedError{After: atLeastSecond(d)}
	}
	return nil
}

func (l *limits) done() { l.inFlight.Add(-1) }

// atLeastSecond rounds d up to whole seconds, at least one (Retry-After
// counts seconds); a wait longer than a minute (a cap of zero) says a minute.
func atLeastSecond(d time.Duration) time.Duration {
	if d > time.Minute {
		return time.Minute
	}
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}
