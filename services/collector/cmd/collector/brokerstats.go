package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/mq"
)

// exportBrokerStats reads the broker's statistics plugin every
// COLLECTOR_BROKER_STATS_INTERVAL (15 s; 0 turns it off) and exports the
// broker_* gauges (store and memory usage, each events queue's depth and the
// age of its oldest message, labelled queue) on reg: the collector is the
// part that stays up when the processor or the database behind the queue is
// down, and it is what answers 503 once the broker's store is full. With
// shards, each shard queue has its own reader; the broker-wide gauges
// (store, memory, broker_stats_up) come from the first shard's.
func exportBrokerStats(ctx context.Context, getenv func(string) string, cfg mq.Config, queues []string, reg prometheus.Registerer, log *slog.Logger) {
	interval := 15 * time.Second
	if v := getenv("COLLECTOR_BROKER_STATS_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			log.Warn("COLLECTOR_BROKER_STATS_INTERVAL is not a duration: using 15s", "value", v)
		} else {
			interval = d
		}
	}
	if interval == 0 {
		log.Warn("COLLECTOR_BROKER_STATS_INTERVAL is 0: no broker_* metrics")
		return
	}
	cfg.Conns = 1
	for i, q := range queues {
		r := reg
		if i > 0 {
			r = queueGaugesOnly{reg}
		}
		e := mq.NewStatsExporter(mq.NewStatsReader(cfg, q, log), interval, r, log)
		go e.Run(ctx)
	}
}

// queueGaugesOnly registers what reg does not hold yet and skips the rest:
// the second and later shards' exporters bring the broker-wide gauges again
// (same name, no queue label), which the first one already exports.
type queueGaugesOnly struct{ prometheus.Registerer }

func (q queueGaugesOnly) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := q.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if !errors.As(err, &dup) {
				panic(err)
			}
		}
	}
}
