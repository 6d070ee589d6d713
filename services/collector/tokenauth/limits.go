package tokenauth

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
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

// maxClients bounds the per-client buckets kept; past it they are all
// forgotten (the global cap still holds).
const maxClients = 10_000

// bucket is a token bucket: tokens refill at rate per second up to burst.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) take(now time.Time, rate float64, burst int) bool {
	if b.last.IsZero() {
		b.tokens = float64(burst)
	} else if d := now.Sub(b.last).Seconds(); d > 0 {
		b.tokens = min(float64(burst), b.tokens+d*rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// limits caps the lookups of tokens the cache does not know as active.
type limits struct {
	cfg      Config
	inFlight atomic.Int64
	mu       sync.Mutex
	global   bucket
	clients  map[netip.Addr]*bucket
}

func (l *limits) init(cfg Config) {
	l.cfg = cfg
	l.clients = make(map[netip.Addr]*bucket)
}

// admit reports whether one more lookup may start now; when it does, the
// caller calls done once the lookup is over.
func (l *limits) admit(ctx context.Context, now time.Time) bool {
	if l.inFlight.Add(1) > int64(l.cfg.UnknownInFlight) {
		l.inFlight.Add(-1)
		return false
	}
	addr, hasAddr := ctx.Value(clientKey{}).(netip.Addr)
	l.mu.Lock()
	ok := true
	var cb *bucket
	if hasAddr {
		cb = l.clients[addr]
		if cb == nil {
			if len(l.clients) >= maxClients {
				clear(l.clients)
			}
			cb = &bucket{}
			l.clients[addr] = cb
		}
		// Peek the client's bucket first so a client over its own cap does
		// not use up the global one.
		ok = cb.take(now, l.cfg.ClientRate, l.cfg.ClientBurst)
	}
	if ok {
		ok = l.global.take(now, l.cfg.UnknownRate, l.cfg.UnknownBurst)
		if !ok && cb != nil {
			cb.tokens = min(float64(l.cfg.ClientBurst), cb.tokens+1) // not spent: give it back
		}
	}
	l.mu.Unlock()
	if !ok {
		l.inFlight.Add(-1)
	}
	return ok
}

func (l *limits) done() { l.inFlight.Add(-1) }
