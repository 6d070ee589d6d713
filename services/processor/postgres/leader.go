package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/pipeline"
)

// LockKey is the advisory lock only the active processor holds. Advisory
// locks are per database, so it is one lock per events DB.
const LockKey int64 = 0x74767072_6f63 // "tvproc"

// AdvisoryLock is the processor's pipeline.Locker: a session-level
// advisory lock held on a connection of its own. When the holder dies its
// connection closes, Postgres releases the lock, and a waiting replica takes
// it on its next try.
type AdvisoryLock struct {
	url  string
	key  int64
	poll time.Duration
	log  *slog.Logger
}

// NewAdvisoryLock returns the lock key of the database at url, tried every
// poll while another replica holds it.
func NewAdvisoryLock(url string, key int64, poll time.Duration, log *slog.Logger) *AdvisoryLock {
	return &AdvisoryLock{url: url, key: key, poll: poll, log: log}
}

// NewLeader returns the processor's leader loop: the advisory lock key,
// tried every poll, and its connection checked every poll. gauge, when not
// nil, is 1 while this replica leads.
func NewLeader(url string, key int64, poll time.Duration, gauge prometheus.Gauge, log *slog.Logger) *pipeline.Leader {
	return pipeline.NewLeader(NewAdvisoryLock(url, key, poll, log), pipeline.LeaderConfig{
		Name: "leader lock", CheckEvery: poll, CheckTimeout: max(poll, 2*time.Second), Gauge: gauge,
	}, log)
}

// Acquire connects and tries the lock every poll until it holds it or ctx
// ends.
func (l *AdvisoryLock) Acquire(ctx context.Context) (pipeline.Lease, error) {
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
				return &advisoryLease{conn: conn, key: l.key, log: l.log}, nil
			case !waiting:
				l.log.Info("another processor holds the leader lock, waiting")
				waiting = true
			}
		}
		if !pipeline.Sleep(ctx, l.poll) {
			if conn != nil {
				closeConn(conn)
			}
			return nil, ctx.Err()
		}
	}
}

func (l *AdvisoryLock) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(l.url)
	if err != nil {
		return nil, fmt.Errorf("parse EVENTS_DATABASE_URL: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// advisoryLease is a held advisory lock.
type advisoryLease struct {
	conn *pgx.Conn
	key  int64
	log  *slog.Logger
	lost atomic.Bool
}

// Check pings the lock's connection: the lock lives as long as it does.
func (a *advisoryLease) Check(ctx context.Context) error {
	if _, err := a.conn.Exec(ctx, "SELECT 1"); err != nil {
		a.lost.Store(true)
		return fmt.Errorf("leader lock connection: %w", err)
	}
	return nil
}

// Release unlocks (unless the connection was lost) and closes the connection.
func (a *advisoryLease) Release() {
	if !a.lost.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := a.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", a.key); err != nil {
			a.log.Warn("leader lock release failed; closing its connection releases it", "err", fmt.Sprint(err))
		}
		cancel()
	}
	closeConn(a.conn)
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
