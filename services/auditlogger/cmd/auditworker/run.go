package main

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"sort"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/auditlogger"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/auditlogger/trail/s3store"
	"threatview/migrations"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/mq"
	"threatview/platform/pipeline"
	"threatview/platform/wire"
)

var version = "dev"

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	return runWith(ctx, getenv, stdout, nil)
}

// runWith is run with a hook receiving the ops server's address (tests use
// port 0).
func runWith(ctx context.Context, getenv func(string) string, stdout io.Writer, onListen func(net.Addr)) error {
	var cfg Config
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
	leaderGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "auditworker_leader",
		Help: "1 while this instance holds the worker lock and consumes.",
	})
	partsGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "auditworker_partitions_ahead_months",
		Help: "Whole months after the current one that have their own audit_events partition, read from information_schema after each partition upkeep (0 means next month's rows land in the catch-all).",
	})
	reg.MustRegister(leaderGauge, partsGauge, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "auditworker_insert_statements_total",
		Help: "INSERT statements executed.",
	}, func() float64 { return float64(store.Statements()) }))
	dlq := mq.NewPublisher(cfg.Broker, log)
	defer dlq.Close()
	cons := pipeline.NewConsumer(auditlogger.WorkerHandler(store), dlq, pipeline.Config{
		Queue: cfg.Queue, MaxItems: cfg.BatchMax, MaxMessages: cfg.Prefetch, MaxWait: cfg.BatchMaxWait,
		FlushTimeout: 10 * time.Second, PartName: "record", Metrics: auditlogger.WorkerMetrics(reg),
	}, log)
	leader := pipeline.NewLeader(mariadb.NewWorkerLock(db, cfg.LockTimeout, log), pipeline.LeaderConfig{
		Name: "worker lock", CheckEvery: 2 * time.Second, CheckTimeout: 5 * time.Second, Gauge: leaderGauge,
	}, log)

	// The checkpoint metrics are registered with or without a signing key,
	// so that the absence of checkpoints (a timestamp of 0 that never
	// advances) alerts like a stalled checkpointer.
	cpSize := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "auditworker_checkpoint_size",
		Help: "Leaves in the tree the latest signed checkpoint covers.",
	})
	cpTime := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "auditworker_checkpoint_timestamp_seconds",
		Help: "Unix time of the latest signed checkpoint (0 until one is signed, and always without a signing key).",
	})
	cpFailed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auditworker_checkpoint_failures_total",
		Help: "Checkpoints that could not be made (each is retried at the next tick, covering every leaf since the last one made).",
	})
	cpRefused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auditworker_checkpoint_refusals_total",
		Help: "Checkpoints refused because the database's tree does not extend the last signed one (shrunk or rewritten history); nothing is signed until it does.",
	})
	putFailed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "auditworker_trail_store_put_failures_total",
		Help: "Failed writes of checkpoints and leaf bundles to the object store, by store (s3 or dir).",
	}, []string{"store"})
	readFailed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "auditworker_trail_store_read_failures_total",
		Help: "Failed reads (list, get) of the object store, by store (s3 or dir): the worker reads its last signed checkpoint there before it signs.",
	}, []string{"store"})
	reg.MustRegister(cpSize, cpTime, cpFailed, cpRefused, putFailed, readFailed)

	var cp *trail.Checkpointer
	if cfg.SigningKeys != "" {
		signer, keys, err := trail.ParseSigningKeys(cfg.SigningKeys)
		if err != nil {
			return err
		}
		store, err := s3store.Open(ctx, cfg.TrailDir, cfg.TrailS3, func(kind string, s trail.ObjectStore) trail.ObjectStore {
			return countedStore{ObjectStore: s, putFailed: putFailed.WithLabelValues(kind), readFailed: readFailed.WithLabelValues(kind)}
		})
		if err != nil {
			return err
		}
		cp = &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: store, Signer: signer, Keys: keys, Log: log,
			OnCheckpoint: func(c *trail.Checkpoint) { cpSize.Set(float64(c.Size)); cpTime.Set(float64(c.Time.Unix())) },
			OnError:      func(error) { cpFailed.Inc() },
			OnRefusal:    func(error) { cpRefused.Inc() }}
		log.Info("checkpoints signed", "key_id", signer.KeyID, "every", cfg.CheckpointEvery.String(), "dir", cfg.TrailDir,
			"s3_bucket", cfg.TrailS3.Bucket, "s3_prefix", cfg.TrailS3.Prefix, "object_lock", cfg.TrailS3.LockMode)
		if store == nil {
			log.Warn("no object store for the audit trail (AUDIT_TRAIL_DIR, AUDIT_TRAIL_S3_BUCKET): checkpoints stay in the database, and every verification reports the trail unanchored")
		}
	} else {
		log.Warn("AUDIT_SIGNING_KEYS is blank: audit rows are chained but no checkpoint is signed, and every verification reports the trail unanchored")
	}

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

	err = leader.Run(ctx, func(ctx context.Context) error { return lead(ctx, cfg, db, store, cp, cons, partsGauge, log) })
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

// countedStore counts an object store's failed writes and reads.
type countedStore struct {
	trail.ObjectStore
	putFailed, readFailed prometheus.Counter
}

func (c countedStore) Put(ctx context.Context, key string, data []byte) error {
	err := c.ObjectStore.Put(ctx, key, data)
	if err != nil {
		c.putFailed.Inc()
	}
	return err
}

func (c countedStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := c.ObjectStore.Get(ctx, key)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.readFailed.Inc()
	}
	return b, err
}

func (c countedStore) List(ctx context.Context, prefix string) ([]string, error) {
	keys, err := c.ObjectStore.List(ctx, prefix)
	if err != nil {
		c.readFailed.Inc()
	}
	return keys, err
}

// ListAfter implements trail.ListerAfter (with List and a filter when the
// store has no ListAfter of its own).
func (c countedStore) ListAfter(ctx context.Context, prefix, after string) ([]string, error) {
	if la, ok := c.ObjectStore.(trail.ListerAfter); ok {
		keys, err := la.ListAfter(ctx, prefix, after)
		if err != nil {
			c.readFailed.Inc()
		}
		return keys, err
	}
	keys, err := c.List(ctx, prefix)
	i := sort.SearchStrings(keys, after)
	for i < len(keys) && keys[i] <= after {
		i++
	}
	return keys[i:], err
}

// lead consumes the queue while the worker lock holds (ctx ends when it is
// lost).
func lead(ctx context.Context, cfg Config, db *sql.DB, store *mariadb.Store, cp *trail.Checkpointer,
	cons *pipeline.Consumer[wire.AuditRecord], partsGauge prometheus.Gauge, log *slog.Logger) error {
	err := pipeline.Retry(ctx, pipeline.DefaultBackoff, func() error {
		n, err := store.LoadMaxPacket(ctx)
		if err == nil {
			log.Info("insert statements sized", "max_allowed_packet", n)
		}
		return err
	}, func(err error, wait time.Duration) {
		log.Warn("retrying", "op", "read max_allowed_packet", "err", err, "backoff", wait.String())
	})
	if err != nil {
		return nil // ctx ended: shutdown, or the lock was lost
	}
	go pipeline.Every(ctx, time.Hour, maintainPartitions(ctx, db, cfg.PartitionsAhead, partsGauge, log))
	cpDone := make(chan struct{})
	if cp != nil {
		go func() { defer close(cpDone); cp.Run(ctx, cfg.CheckpointEvery) }()
	} else {
		close(cpDone)
	}
	defer func() { <-cpDone }()

	// The subscription outlives ctx until the consumer returns, so the batch
	// in hand is acknowledged on a live connection at shutdown.
	subCtx, subCancel := context.WithCancel(context.WithoutCancel(ctx))
	sub := mq.Subscribe(subCtx, cfg.Broker, cfg.Queue, cfg.Prefetch, log)
	err = cons.Run(ctx, sub.C())
	subCancel()
	<-sub.Done()
	return err
}

// maintainPartitions returns the job that keeps monthly partitions ahead
// (run at start and hourly). The worker's user normally lacks ALTER (it
// needs INSERT and SELECT only); then the migrate command keeps them and
// the job logs a warning once. After each run it sets gauge to the months
// ahead the catalog holds, whoever made them.
func maintainPartitions(ctx context.Context, db *sql.DB, ahead int, gauge prometheus.Gauge, log *slog.Logger) func() {
	warned := false
	return func() {
		n, err := migrations.EnsureAuditPartitions(ctx, db, time.Now(), ahead)
		switch {
		case err == nil:
			if n > 0 {
				log.Info("audit partitions created", "count", n)
			}
		case ctx.Err() != nil:
		case mariadb.IsPermission(err):
			if !warned {
				log.Warn("no privilege to create audit partitions; run the migrate command monthly (it keeps them ahead)", "err", err)
				warned = true
			}
		default:
			log.Warn("audit partition maintenance failed", "err", err)
		}
		got, err := mariadb.PartitionsAhead(ctx, db, time.Now())
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("reading audit partitions ahead failed", "err", err)
			}
			return
		}
		gauge.Set(float64(got))
	}
}
