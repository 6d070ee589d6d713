package pipeline

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Backoff is the one retry policy of the services: the wait before retry n
// (0 first) is Initial doubled n times, capped at Max, then jittered to a
// random value between half of it and all of it, so replicas that failed
// together do not retry together.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

// DefaultBackoff is the policy every worker uses: from 100 ms to 5 s.
var DefaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// Wait returns the jittered wait before retry n (0 first).
func (b Backoff) Wait(n int) time.Duration {
	d := b.Initial
	if d <= 0 {
		d = DefaultBackoff.Initial
	}
	limit := b.Max
	if limit < d {
		limit = d
	}
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	return half + rand.N(d-half+1)
}

// permanent marks an error Retry must not retry.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that Retry returns it at once (unwrapped) instead
// of retrying. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// Retry calls f until it returns nil, an error made with Permanent (Retry
// returns the error inside) or ctx ends (Retry returns f's last error
// joined with ctx's). Between attempts it waits b.Wait(n) and calls
// onRetry, when not nil, with the error and the wait (to log and count).
func Retry(ctx context.Context, b Backoff, f func() error, onRetry func(err error, wait time.Duration)) error {
	for n := 0; ; n++ {
		err := f()
		if err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return p.err
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		wait := b.Wait(n)
		if onRetry != nil {
			onRetry(err, wait)
		}
		if !Sleep(ctx, wait) {
			return errors.Join(err, ctx.Err())
		}
	}
}

// Every calls f now and then every d until ctx ends.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sleep waits d or until ctx ends; it reports whether the whole of d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
