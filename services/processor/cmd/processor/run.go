package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/mq"
	"threatview/platform/pipeline"
	"threatview/processor"
	"threatview/processor/postgres"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// crashAfterCommitEnv is a test-only hook: when "1" the process exits right
// after its first commit, before acking, so a test can prove a crash in that
// window loses and doubles nothing. Never set it in a deployment.
const crashAfterCommitEnv = "PROCESSOR_TEST_CRASH_AFTER_COMMIT"

// run starts the ops HTTP server and, while this replica holds the leader
// lock, the consumer and partition maintenance. It returns
// when ctx ends (nil) or something fails for good.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "processor", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg), "prefetch", cfg.EffectivePrefetch())

	store, err := openStore(ctx, &cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	pub := mq.NewPublisher(cfg.Broker, log)
	defer pub.Close()

	reg := httpserver.NewRegistry()
	metrics := processor.NewMetrics(reg)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "processor_events_held_late_total",
		Help: "Events held in events.late_events: received for a month that was archived and dropped (archive them with archiver --late).",
	}, func() float64 { return float64(store.HeldLate()) }))
	leader := postgres.NewLeader(cfg.DatabaseURL, cfg.Queue, cfg.LeaderPoll, metrics.Leader, log)
	var sub atomic.Pointer[mq.Subscriber]
	checks := map[string]httpserver.Check{
		"postgres": store.Ping,
		"leader":   leader.Ready,
		"broker": func(ctx context.Context) error {
			s := sub.Load()
			if s == nil {
				return errors.New("not subscribed")
			}
			return s.Ready(ctx)
		},
	}
	r := chi.NewRouter()
	r.Use(httpserver.Instrument(reg, "processor"))
	httpserver.MountOps(r, reg, checks)
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)

	ccfg := pipeline.Config{Queue: cfg.Queue, MaxItems: cfg.BatchMaxEvents, MaxWait: cfg.BatchMaxWait,
		PartName: "request", Metrics: metrics.Pipeline()}
	if getenv(crashAfterCommitEnv) == "1" {
		ccfg.AfterCommit = func() {
			fmt.Fprintln(os.Stderr, "processor: "+crashAfterCommitEnv+" set, exiting after commit")
			os.Exit(1)
		}
	}
	sup := processor.NewSuppressions(metrics.Suppressed)
	var sink processor.Store = store
	if cfg.YieldCPUPressure > 0 {
		high := float64(cfg.YieldCPUPressure) / 100
		sink = processor.Yielding(store, processor.NewYield(high, high/2, float64(cfg.YieldMinRate), metrics.RateCap))
	}
	cons := pipeline.NewConsumer(processor.Handler(processor.Suppressing(sink, sup)), pub, ccfg, log)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	httpErr := make(chan error, 1)
	go func() {
		err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, r, log, nil)
		if err != nil {
			cancel()
		}
		httpErr <- err
	}()

	err = leader.Run(ctx, func(lctx context.Context) error {
		// The suppressions are read before the first delivery is taken, so
		// a restart never stores a suppressed device's queued events.
		if err := loadSuppressions(lctx, store, sup, metrics, log, true); err != nil {
			return err
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			pipeline.Every(lctx, cfg.SuppressionRefresh, func() { _ = loadSuppressions(lctx, store, sup, metrics, log, false) })
		})
		wg.Go(func() {
			pipeline.Every(lctx, time.Hour, func() { maintainPartitions(lctx, store, cfg.PartitionsAhead, metrics.PartitionsAhead, log) })
		})
		defer wg.Wait()

		// The subscription outlives lctx until the consumer has acked the
		// batch in hand: acks travel on the subscription's connection.
		subCtx, cancelSub := context.WithCancel(context.WithoutCancel(lctx))
		s := mq.Subscribe(subCtx, cfg.Broker, cfg.Queue, cfg.EffectivePrefetch(), log)
		sub.Store(s)
		err := cons.Run(lctx, s.C())
		sub.Store(nil)
		cancelSub()
		<-s.Done()
		return err
	})
	cancel()
	if herr := <-httpErr; herr != nil && err == nil {
		err = herr
	}
	log.Info("stopped")
	return err
}

// loadSuppressions reads the suppressed devices into sup. With wait it
// retries until it succeeds or ctx ends; otherwise a failure keeps the
// previous set (logged) until the next refresh.
func loadSuppressions(ctx context.Context, store *postgres.Store, sup *processor.Suppressions, m *processor.Metrics, log *slog.Logger, wait bool) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		subjects, err := store.Suppressions(rctx)
		cancel()
		if err == nil {
			sup.Replace(subjects)
			m.Suppressions.Set(float64(len(subjects)))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("suppressions not refreshed", "err", err)
		if !wait {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// maintainPartitions creates the partitions ahead, then sets gauge to the
// months ahead that the catalog holds (also after a failed upkeep, so the
// gauge tells what exists, not what was meant to).
func maintainPartitions(ctx context.Context, store *postgres.Store, ahead int, gauge prometheus.Gauge, log *slog.Logger) {
	n, err := store.MaintainPartitions(ctx, ahead)
	switch {
	case err != nil && ctx.Err() == nil:
		log.Error("partition maintenance failed", "err", err)
	case n > 0:
		log.Info("partitions created", "count", n)
	}
	got, err := store.PartitionsAhead(ctx, time.Now())
	if err != nil {
		if ctx.Err() == nil {
			log.Error("reading partitions ahead failed", "err", err)
		}
		return
	}
	gauge.Set(float64(got))
}

// openStore opens the events DB as the writer of cfg's queue's shard, with
// the alerts outbox on or off as configured.
func openStore(ctx context.Context, cfg *Config) (*postgres.Store, error) {
	shard, err := cfg.Shard()
	if err != nil {
		return nil, err
	}
	store, err := postgres.OpenShard(ctx, cfg.DatabaseURL, cfg.DBMaxConns, shard)
	if err != nil {
		return nil, err
	}
	if !cfg.Outbox {
		store.WithoutOutbox()
	}
	return store, nil
}
