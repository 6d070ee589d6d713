package postgres

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/pglock"
	"threatview/platform/pipeline"
)

// LockKey is the advisory lock only the active processor holds. Advisory
// locks are per database, so it is one lock per events DB.
const LockKey int64 = 0x74767072_6f63 // "tvproc"

// NewLeader returns the processor's leader loop: the advisory lock key of
// the database at url on a connection of its own (platform/pglock), tried
// every poll while another replica holds it and checked every poll while
// held. When the holder dies its connection closes, Postgres releases the
// lock, and a waiting replica takes it on its next try. gauge, when not
// nil, is 1 while this replica leads.
func NewLeader(url string, key int64, poll time.Duration, gauge prometheus.Gauge, log *slog.Logger) *pipeline.Leader {
	return pglock.NewLeader(pglock.Config{Name: "leader lock", Holder: "processor", URL: url, Key: key,
		Poll: poll, Timeout: connectTimeout}, gauge, log)
}
