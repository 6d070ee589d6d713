package postgres

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/pglock"
	"threatview/platform/pipeline"
)

// LockKey is the advisory lock only the active processor of DefaultQueue
// holds. Advisory locks are per database, so it is one lock per events DB.
const LockKey int64 = 0x74767072_6f63 // "tvproc"

// DefaultQueue is the events queue of a deployment without shards.
const DefaultQueue = "/queue/threatview.events"

// NewLeader returns the leader loop of the processor consuming queue: one
// active processor per queue. The default queue's lock is LockKey (so a
// processor from before shards and one after never lead together on it);
// a shard's queue (threatview.events.<k>) has a text key of its own
// ("threatview processor <queue>"), so the shards' processors lead side by
// side. The lock is the advisory lock of the database at url on a
// connection of its own (platform/pglock), tried
// every poll while another replica holds it and checked every poll while
// held. When the holder dies its connection closes, Postgres releases the
// lock, and a waiting replica takes it on its next try. gauge, when not
// nil, is 1 while this replica leads.
func NewLeader(url, queue string, poll time.Duration, gauge prometheus.Gauge, log *slog.Logger) *pipeline.Leader {
	cfg := pglock.Config{Name: "leader lock", Holder: "processor", URL: url, Key: LockKey,
		Poll: poll, Timeout: connectTimeout}
	if queue != DefaultQueue {
		cfg.TextKey = "threatview processor " + queue
	}
	return pglock.NewLeader(cfg, gauge, log)
}
