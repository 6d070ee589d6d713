package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/platform/pipeline"
)

// LockKey is the advisory lock the active alerts replica holds ("tvalrt").
const LockKey int64 = 0x7476616c7274

// Lock is the alerts service's pipeline.Locker: a session-level advisory
// lock on a connection of its own, released by Postgres when the holder
// dies (a kill -9 frees it as soon as the server sees the connection go).
type Lock struct {
	url  string
	poll time.Duration
	log  *slog.Logger
}

// NewLeader returns the leader loop over the lock, tried and checked every
// poll.
func NewLeader(url string, poll time.Duration, log *slog.Logger) *pipeline.Leader {
	return pipeline.NewLeader(&Lock{url: url, poll: poll, log: log}, pipeline.LeaderConfig{
		Name: "alerts leader lock", CheckEvery: poll, CheckTimeout: max(poll, 2*time.Second),
	}, log)
}

// Acquire tries the lock every poll until it holds it or ctx ends.
func (l *Lock) Acquire(ctx context.Context) (pipeline.Lease, error) {
	for {
		conn, err := pgx.Connect(ctx, l.url)
		if err == nil {
			var ok bool
			if err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", LockKey).Scan(&ok); err == nil && ok {
				return &lease{conn: conn}, nil
			}
			_ = conn.Close(context.WithoutCancel(ctx))
		}
		if err != nil {
			l.log.Warn("alerts leader lock try failed", "err", err)
		}
		if !pipeline.Sleep(ctx, l.poll) {
			return nil, ctx.Err()
		}
	}
}

type lease struct {
	conn *pgx.Conn
	lost atomic.Bool
}

func (a *lease) Check(ctx context.Context) error {
	if _, err := a.conn.Exec(ctx, "SELECT 1"); err != nil {
		a.lost.Store(true)
		return fmt.Errorf("alerts leader lock connection: %w", err)
	}
	return nil
}

func (a *lease) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !a.lost.Load() {
		_, _ = a.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", LockKey)
	}
	_ = a.conn.Close(ctx)
}
