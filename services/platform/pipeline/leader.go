package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Locker takes the lock that makes one replica at a time the active one
// (a Postgres advisory lock, a MariaDB named lock). The lock must be held
// by a connection of its own, so that the database frees it when the
// holder dies.
type Locker interface {
	// Acquire waits until it holds the lock or ctx ends (it then returns
	// ctx's error). Any other error is retried by the Leader with backoff.
	Acquire(ctx context.Context) (Lease, error)
}

// Lease is a held lock.
type Lease interface {
	// Check returns nil while the lock is still this lease's, and an error
	// once it may be another replica's (its connection failed).
	Check(ctx context.Context) error
	// Release frees the lock and its connection.
	Release()
}

// ErrNotLeader is returned by Leader.Ready while this replica does not hold
// the lock.
var ErrNotLeader = errors.New("not the leader")

// LeaderConfig tunes a Leader.
type LeaderConfig struct {
	Name         string        // in the logs: "leader lock", "worker lock"
	CheckEvery   time.Duration // how often the held lock is checked (default 1 s)
	CheckTimeout time.Duration // how long one check may take (default 2 s)
	// Gauge, when set, is 1 while this replica holds the lock.
	Gauge prometheus.Gauge
}

// Leader is the loop that waits for a lock, runs the active replica's work
// while holding it, and waits again when the lock is lost.
type Leader struct {
	locker Locker
	cfg    LeaderConfig
	log    *slog.Logger
	held   atomic.Bool
}

// NewLeader returns a Leader over locker.
func NewLeader(locker Locker, cfg LeaderConfig, log *slog.Logger) *Leader {
	if cfg.Name == "" {
		cfg.Name = "leader lock"
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.CheckTimeout <= 0 {
		cfg.CheckTimeout = 2 * time.Second
	}
	return &Leader{locker: locker, cfg: cfg, log: log}
}

// Ready reports whether this replica holds the lock (for /readyz).
func (l *Leader) Ready(context.Context) error {
	if !l.held.Load() {
		return ErrNotLeader
	}
	return nil
}

// Run waits for the lock and calls fn while holding it. fn's context is
// cancelled, with the check's error as its cause, when a check of the lock
// fails (the lock may be another replica's by then), or when ctx ends; fn
// must then return promptly. After losing the lock Run waits for it again.
// Run returns nil when ctx ends or fn returns nil while holding the lock,
// and fn's error when fn fails while still holding it.
func (l *Leader) Run(ctx context.Context, fn func(context.Context) error) error {
	for {
		var lease Lease
		err := Retry(ctx, DefaultBackoff, func() (err error) {
			lease, err = l.locker.Acquire(ctx)
			return err
		}, func(err error, wait time.Duration) {
			l.log.Warn(l.cfg.Name+" acquire failed, retrying", "err", err, "backoff", wait.String())
		})
		if err != nil {
			return nil // ctx ended
		}
		l.held.Store(true)
		l.setGauge(1)
		l.log.Info(l.cfg.Name + " acquired")
		fctx, cancel := context.WithCancelCause(ctx)
		var lost atomic.Bool
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			if err := l.watch(fctx, lease); err != nil {
				l.held.Store(false) // before fn hears of it
				lost.Store(true)
				cancel(err)
			}
		}()
		err = fn(fctx)
		cancel(nil)
		<-watched
		l.held.Store(false)
		l.setGauge(0)
		lease.Release()
		switch {
		case ctx.Err() != nil:
			return nil
		case lost.Load():
			l.log.Warn(l.cfg.Name+" lost, waiting to take it again", "err", err)
		default:
			return err
		}
	}
}

// watch checks lease every CheckEvery until ctx ends (nil) or a check
// fails (its error).
func (l *Leader) watch(ctx context.Context, lease Lease) error {
	t := time.NewTicker(l.cfg.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, l.cfg.CheckTimeout)
		err := lease.Check(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			l.log.Error(l.cfg.Name+" lost, stopping", "err", err)
			return err
		}
	}
}

func (l *Leader) setGauge(v float64) {
	if l.cfg.Gauge != nil {
		l.cfg.Gauge.Set(v)
	}
}
