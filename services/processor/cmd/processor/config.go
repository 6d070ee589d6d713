package main

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"threatview/platform/httpserver"
	"threatview/platform/mq"
	"threatview/platform/wire"
)

// Config is the processor's configuration, read from the environment.
type Config struct {
	// DatabaseURL is the events DB as a postgres:// URL.
	DatabaseURL string `env:"EVENTS_DATABASE_URL,required" secret:"true"`
	// DBMaxConns bounds the pool (writer, suppressions, readiness, partitions).
	DBMaxConns int32 `env:"PROCESSOR_DB_MAX_CONNS" envDefault:"4"`

	Broker mq.Config
	// Queue is the destination consumed; its dead-letter queue is wire.DeadLetter(Queue).
	Queue string `env:"PROCESSOR_QUEUE" envDefault:"/queue/threatview.events"`
	// Prefetch is how many unacknowledged messages the broker sends ahead,
	// at most; PrefetchBytes may lower it (see EffectivePrefetch).
	Prefetch int `env:"PROCESSOR_PREFETCH" envDefault:"2000"`
	// PrefetchBytes bounds the bytes of the messages held unacknowledged
	// (0: a quarter of GOMEMLIMIT, or 256 MiB without one). The broker's
	// prefetch counts messages, so it is set to PrefetchBytes / MessageBytes.
	PrefetchBytes int64 `env:"PROCESSOR_PREFETCH_BYTES" envDefault:"0"`
	// MessageBytes is the largest message the collector sends: its message
	// cap (512 KiB), or one request of up to 1 MiB with its enrichment.
	MessageBytes int64 `env:"PROCESSOR_MESSAGE_BYTES" envDefault:"1572864"`
	// BatchMaxEvents closes a batch once it holds this many events.
	BatchMaxEvents int `env:"PROCESSOR_BATCH_MAX_EVENTS" envDefault:"2000"`
	// BatchMaxWait closes a batch this long after its first message arrived.
	// Nobody waits on it (the collector has answered already); longer
	// batches cost PostgreSQL less per event (0.15 against 0.22 cores at
	// 1,500 req/s for 100 ms against 25 ms).
	BatchMaxWait time.Duration `env:"PROCESSOR_BATCH_MAX_WAIT" envDefault:"100ms"`

	// YieldCPUPressure, when above 0, paces the writes while the machine's
	// CPU pressure (PSI "some avg10", in percent) is above it, so a drain
	// leaves the cores to live traffic first; unpaced again once it is
	// below half of it (processor.Yield). 0: never paced.
	YieldCPUPressure int `env:"PROCESSOR_YIELD_CPU_PRESSURE" envDefault:"0"`
	// YieldMinRate is the slowest the pacing lets a drain go, events/s.
	YieldMinRate int `env:"PROCESSOR_YIELD_MIN_RATE" envDefault:"2000"`
	// PartitionsAhead is how many months after the current one have partitions.
	PartitionsAhead int `env:"PROCESSOR_PARTITIONS_AHEAD" envDefault:"3"`
	// SuppressionRefresh is how often the suppressed devices are re-read from
	// events.suppressions (an erasure waits out two of these before it
	// deletes, see services/retention).
	SuppressionRefresh time.Duration `env:"PROCESSOR_SUPPRESSION_REFRESH" envDefault:"2s"`
	// LeaderPoll is how often a standby tries the leader lock and the leader
	// checks the connection holding it.
	LeaderPoll time.Duration `env:"PROCESSOR_LEADER_POLL" envDefault:"1s"`
	// Outbox is whether a threat event also gets its alerts.outbox row for the
	// alerts service; false when that service does not run, since only it
	// prunes the outbox (docs/siem.md).
	Outbox bool `env:"PROCESSOR_ALERTS_OUTBOX" envDefault:"true"`

	// HTTP serves the ops endpoints only (default :8082).
	HTTP     httpserver.Config
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`
}

// defaultAddr is where the ops endpoints listen when HTTP_ADDR is blank.
const defaultAddr = ":8082"

// Validate checks the values parsing cannot.
func (c *Config) Validate() error {
	switch {
	case c.DBMaxConns < 2:
		return fmt.Errorf("PROCESSOR_DB_MAX_CONNS must be at least 2, got %d", c.DBMaxConns)
	case c.Queue == "":
		return errors.New("PROCESSOR_QUEUE must not be empty")
	}
	if _, err := c.Shard(); err != nil {
		return err
	}
	switch {
	case c.SuppressionRefresh <= 0:
		return fmt.Errorf("PROCESSOR_SUPPRESSION_REFRESH must be positive, got %s", c.SuppressionRefresh)
	case c.Prefetch <= 0:
		return fmt.Errorf("PROCESSOR_PREFETCH must be positive, got %d", c.Prefetch)
	case c.PrefetchBytes < 0:
		return fmt.Errorf("PROCESSOR_PREFETCH_BYTES must not be negative, got %d", c.PrefetchBytes)
	case c.MessageBytes <= 0:
		return fmt.Errorf("PROCESSOR_MESSAGE_BYTES must be positive, got %d", c.MessageBytes)
	case c.BatchMaxEvents <= 0:
		return fmt.Errorf("PROCESSOR_BATCH_MAX_EVENTS must be positive, got %d", c.BatchMaxEvents)
	case c.BatchMaxWait < 0:
		return fmt.Errorf("PROCESSOR_BATCH_MAX_WAIT must not be negative, got %s", c.BatchMaxWait)
	case c.YieldCPUPressure < 0 || c.YieldCPUPressure > 100:
		return fmt.Errorf("PROCESSOR_YIELD_CPU_PRESSURE must be a percentage (0: off), got %d", c.YieldCPUPressure)
	case c.YieldMinRate <= 0:
		return fmt.Errorf("PROCESSOR_YIELD_MIN_RATE must be positive, got %d", c.YieldMinRate)
	case c.PartitionsAhead < 0:
		return fmt.Errorf("PROCESSOR_PARTITIONS_AHEAD must not be negative, got %d", c.PartitionsAhead)
	case c.LeaderPoll <= 0:
		return fmt.Errorf("PROCESSOR_LEADER_POLL must be positive, got %s", c.LeaderPoll)
	}
	return nil
}

// Shard is the events shard Queue holds: k of <base>.<k> (the collector's
// wire.EventsQueues, and a drain processor of a queue left behind by a
// change of shards takes that queue's k), else 0 (the one queue of an
// unsharded deployment). The store writes its alerts outbox rows as the
// shard's (postgres.OpenShard).
func (c *Config) Shard() (int, error) {
	k, err := wire.QueueShard(c.Queue)
	if err != nil {
		return 0, fmt.Errorf("PROCESSOR_QUEUE: %w", err)
	}
	return k, nil
}

// EffectivePrefetch is the broker prefetch: Prefetch, lowered so that
// that many messages of MessageBytes fit in the byte budget (PrefetchBytes,
// or its default from GOMEMLIMIT), and at least 1. Hostile bodies cannot
// then make the processor hold more than the budget in messages.
func (c *Config) EffectivePrefetch() int {
	budget := c.PrefetchBytes
	if budget <= 0 {
		budget = 256 << 20
		if limit := debug.SetMemoryLimit(-1); limit > 0 && limit != math.MaxInt64 {
			budget = limit / 4
		}
	}
	n := budget / max(c.MessageBytes, 1)
	return int(max(1, min(int64(c.Prefetch), n)))
}
