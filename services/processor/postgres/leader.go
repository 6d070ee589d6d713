package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// LockKey is the advisory lock only the active processor holds. Advisory
// locks are per database, so it is one lock per events DB.
const LockKey int64 = 0x74767072_6f63 // "tvproc"

// Leader makes one replica at a time the active one with a session-level
// advisory lock held on a connection of its own: when the holder dies its
// connection closes, Postgres releases the lock, and a waiting replica
// takes it on its next try.
type Leader struct {
	url  string
	key  int64
	poll time.Duration
	log  *slog.Logger
	held atomic.Bool
}

// NewLeader returns a Leader for the database at url that tries the lock,
// and checks the connection holding it, every poll.
func NewLeader(url string, key int64, poll time.Duration, log *slog.Logger) *Leader {
	return &Leader{url: url, key: key, poll: poll, log: log}
}

// ErrNotLeader is returned by Ready while this replica does not hold the lock.
var ErrNotLeader = errors.New("not the leader")

// Ready reports whether this replica holds the lock (for /readyz).
func (l *Leader) Ready(context.Context) error {
	if !l.held.Load() {
		return ErrNotLeader
	}
	return nil
}

// Run waits for the lock and calls fn while holding it. fn's context is
// cancelled when the connection holding the lock fails (the lock may be
// another replica's by then) or ctx ends; fn must then return promptly.
// After losing the lock Run waits for it again. Run returns nil when ctx
// ends, or fn's error when fn fails while still holding the lock.
func (l *Leader) Run(ctx context.Context, fn func(context.Context) error) error {
	for {
		conn, err := l.acquire(ctx)
		if err != nil {
			return nil // ctx ended
		}
		l.held.Store(true)
		l.log.Info("leader lock acquired")
		fctx, cancel := context.WithCancel(ctx)
		var lost atomic.Bool
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			l.watch(fctx, conn, &lost)
			if lost.Load() {
				l.held.Store(false) // before fn hears of it
			}
			cancel()
		}()
		err = fn(fctx)
		cancel()
		<-watched
		l.held.Store(false)
		l.release(conn, lost.Load())
		switch {
		case ctx.Err() != nil:
			return nil
		case lost.Load():
			l.log.Warn("leader lock lost, waiting to take it again")
		case err != nil:
			return err
		default:
			return nil
		}
	}
}

// acquire connects and tries the lock every poll until it holds it or ctx ends.
func (l *Leader) acquire(ctx context.Context) (*pgx.Conn, error) {
	var conn *pgx.Conn
	waiting := false
	for {
		if conn == nil {
			c, err := l.connect(ctx)
			if err != nil {
				l.log.Warn("leader lock connection failed", "err", err)
			} else {
				conn = c
			}
		}
		if conn != nil {
			var ok bool
			err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&ok)
			switch {
			case err != nil:
				l.log.Warn("leader lock try failed", "err", err)
				closeConn(conn)
				conn = nil
			case ok:
				return conn, nil
			case !waiting:
				l.log.Info("another processor holds the leader lock, waiting")
				waiting = true
			}
		}
		select {
		case <-ctx.Done():
			if conn != nil {
				closeConn(conn)
			}
			return nil, ctx.Err()
		case <-time.After(l.poll):
		}
	}
}

func (l *Leader) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(l.url)
	if err != nil {
		return nil, fmt.Errorf("parse EVENTS_DATABASE_URL: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// watch pings the lock's connection every poll and returns when ctx ends
// or the ping fails (setting lost).
func (l *Leader) watch(ctx context.Context, conn *pgx.Conn, lost *atomic.Bool) {
	t := time.NewTicker(l.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(l.poll, 2*time.Second))
		_, err := conn.Exec(pctx, "SELECT 1")
		cancel()
		if err != nil && ctx.Err() == nil {
			l.log.Error("leader lock connection failed, stopping", "err", err)
			lost.Store(true)
			return
		}
	}
}

func (l *Leader) release(conn *pgx.Conn, lost bool) {
	if !lost {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key); err != nil {
			l.log.Warn("leader lock release failed; closing its connection releases it", "err", fmt.Sprint(err))
		}
		cancel()
	}
	closeConn(conn)
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
