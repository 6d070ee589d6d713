package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/mq"
)

// exportBrokerStats reads the broker's statistics plugin every
// COLLECTOR_BROKER_STATS_INTERVAL (15 s; 0 turns it off) and exports the
// broker_* gauges (store and memory usage, the events queue's depth and the
// age of its oldest message) on reg: the collector is the part that stays up
// when the processor or the database behind the queue is down, and it is what
// answers 503 once the broker's store is full.
func exportBrokerStats(ctx context.Context, cfg mq.Config, queue string, reg prometheus.Registerer, log *slog.Logger) {
	interval := 15 * time.Second
	if v := os.Getenv("COLLECTOR_BROKER_STATS_INTERVAL"); v != "" {
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
	e := mq.NewStatsExporter(mq.NewStatsReader(cfg, queue, log), interval, reg, log)
	go e.Run(ctx)
}
