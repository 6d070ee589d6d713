package postgres

import (
	"log/slog"
	"time"

	"threatview/platform/pglock"
	"threatview/platform/pipeline"
)

// LockKey is the advisory lock the active alerts replica holds ("tvalrt").
const LockKey int64 = 0x7476616c7274

// NewLeader returns the leader loop over the alerts service's advisory lock
// (platform/pglock: a connection of its own, released by Postgres when the
// holder dies, so a kill -9 frees it as soon as the server sees the
// connection go), tried and checked every poll.
func NewLeader(url string, poll time.Duration, log *slog.Logger) *pipeline.Leader {
	return pglock.NewLeader(pglock.Config{Name: "alerts leader lock", Holder: "alerts replica", URL: url,
		Key: LockKey, Poll: poll}, nil, log)
}
