package main

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/auditlogger"
	"threatview/auditlogger/consumer"
	"threatview/auditlogger/mariadb"
	"threatview/migrations"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/mq"
)

var version = "dev"

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	return runWith(ctx, getenv, stdout, nil)
}

// runWith is run with a hook receiving the ops server's address (tests use
// port 0).
func runWith(ctx context.Context, getenv func(string) string, stdout io.Writer, onListen func(net.Addr)) error {
	var cfg auditlogger.WorkerConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "auditworker", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	db, err := mariadb.Open(cfg.DatabaseDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	store := mariadb.New(db)

	reg := httpserver.NewRegistry()
	leader := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "auditworker_leader",
		Help: "1 while this instance holds the worker lock and consumes.",
	})
	reg.MustRegister(leader, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "auditworker_insert_statements_total",
		Help: "INSERT statements executed.",
	}, func() float64 { return float64(store.Statements()) }))
	dlq := mq.NewPublisher(cfg.Broker, log)
	defer dlq.Close()
	cons := consumer.New(store, dlq, consumer.Options{
		Queue: cfg.Queue, BatchMax: cfg.BatchMax, BatchMaxWait: cfg.BatchMaxWait, Prefetch: cfg.Prefetch,
	}, reg, log)

	r := chi.NewRouter()
	httpserver.MountOps(r, reg, map[string]httpserver.Check{"mariadb": store.Ping})
	r.NotFound(httpserver.NotFound)
	r.MethodNotAllowed(httpserver.MethodNotAllowed)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	httpErr := make(chan error, 1)
	go func() {
		err := httpserver.Run(ctx, cfg.HTTP, ":8084", r, log, onListen)
		if err != nil {
			cancel()
		}
		httpErr <- err
	}()

	err = work(ctx, cfg, db, store, cons, leader, log)
	cancel()
	if herr := <-httpErr; err == nil {
		err = herr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// work waits for the lock, consumes while holding it, and waits again when
// it is lost, until ctx ends.
func work(ctx context.Context, cfg auditlogger.WorkerConfig, db *sql.DB, store *mariadb.Store,
	cons *consumer.Consumer, leader prometheus.Gauge, log *slog.Logger) error {
	var name string
	err := untilOK(ctx, log, "read lock name", func() (err error) {
		name, err = mariadb.LockName(ctx, db)
		return err
	})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		log.Info("waiting for worker lock", "lock", name)
		warned := false
		lock, err := mariadb.Acquire(ctx, db, name, cfg.LockTimeout, func() {
			if !warned {
				log.Info("worker lock held by another instance; standing by", "lock", name)
				warned = true
			}
		})
		if err != nil {
			return err
		}
		log.Info("worker lock acquired", "lock", name)
		leader.Set(1)
		err = lead(ctx, cfg, db, store, cons, lock, log)
		leader.Set(0)
		lock.Release()
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("consuming stopped, waiting for the lock again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// lead consumes the queue while the lock holds.
func lead(ctx context.Context, cfg auditlogger.WorkerConfig, db *sql.DB, store *mariadb.Store,
	cons *consumer.Consumer, lock *mariadb.Lock, log *slog.Logger) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := untilOK(ctx, log, "read max_allowed_packet", func() error {
		n, err := store.LoadMaxPacket(ctx)
		if err == nil {
			log.Info("insert statements sized", "max_allowed_packet", n)
		}
		return err
	}); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				err := lock.Check(cctx)
				ccancel()
				if err != nil && ctx.Err() == nil {
					log.Error("worker lock lost", "err", err)
					cancel(err)
					return
				}
			}
		}
	}()
	go maintainPartitions(ctx, db, cfg.PartitionsAhead, log)

	// The subscription outlives ctx until the consumer returns, so the batch
	// in hand is acknowledged on a live connection at shutdown.
	subCtx, subCancel := context.WithCancel(context.WithoutCancel(ctx))
	sub := mq.Subscribe(subCtx, cfg.Broker, cfg.Queue, cfg.Prefetch, log)
	err := cons.Run(ctx, sub.C())
	subCancel()
	<-sub.Done()
	cancel(nil)
	if err != nil {
		return err
	}
	return context.Cause(ctx)
}

// maintainPartitions keeps monthly partitions ahead, at start and hourly.
// The worker's user normally lacks ALTER (it needs INSERT and SELECT only);
// then the migrate command keeps them and this logs a warning once.
func maintainPartitions(ctx context.Context, db *sql.DB, ahead int, log *slog.Logger) {
	warned := false
	for {
		n, err := migrations.EnsureAuditPartitions(ctx, db, time.Now(), ahead)
		switch {
		case err == nil:
			if n > 0 {
				log.Info("audit partitions created", "count", n)
			}
		case ctx.Err() != nil:
			return
		case mariadb.IsPermission(err):
			if !warned {
				log.Warn("no privilege to create audit partitions; run the migrate command monthly (it keeps them ahead)", "err", err)
				warned = true
			}
		default:
			log.Warn("audit partition maintenance failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Hour):
		}
	}
}

// untilOK retries f with backoff until it succeeds or ctx ends.
func untilOK(ctx context.Context, log *slog.Logger, what string, f func() error) error {
	wait := 200 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("retrying", "op", what, "err", err, "backoff", wait.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}
