package forward

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/platform/pipeline"
)

// Store is what the runners need of the database.
type Store interface {
	// Forwarders lists the live forwarders (with their CA).
	Forwarders(ctx context.Context) ([]alerts.Forwarder, error)
	// Cursor returns the forwarder's position (zero before its first batch).
	Cursor(ctx context.Context, name string) (alerts.Position, error)
	// Outbox returns up to limit rows after pos, of finished transactions
	// only, each shard's in its order (Position.After moves past them).
	Outbox(ctx context.Context, after alerts.Position, limit int) ([]alerts.Event, error)
	// Delivered moves the forwarder's cursor to pos and adds n delivered.
	Delivered(ctx context.Context, forwarderID string, pos alerts.Position, n int) error
	// Failed counts a failed attempt with its message.
	Failed(ctx context.Context, forwarderID, msg string) error
	// Skip bounds the forwarder's backlog: when rows wait after its cursor
	// that are numbered more than max below the outbox's newest, it moves
	// the cursor past them, leaving at most max, adds how many it passed
	// to the forwarder's skipped count, and returns the cursor and that
	// number (0: within the bound).
	Skip(ctx context.Context, forwarderID string, max int64) (alerts.Position, int64, error)
}

// Config tunes the runners.
type Config struct {
	Batch   int           // rows read at once (default 500)
	Poll    time.Duration // wait when the outbox has nothing new (default 500 ms)
	Refresh time.Duration // how often the forwarder list is read (default 5 s)
	Version string
	Host    string
	S3      S3Config // for s3 forwarders
	// Guard decides where syslog and HTTP forwarders may connect (nil:
	// egress.NewGuard(nil), no private address).
	Guard *egress.Guard
	// MaxBacklog bounds each forwarder's backlog in outbox rows while it
	// fails (0: no bound; ALERTS_FORWARD_MAX_BACKLOG).
	MaxBacklog int64
	// Backoff is the wait after a failed batch or a sink that did not
	// start (default 1 s doubling to 1 min).
	Backoff pipeline.Backoff
	// Sink makes a forwarder's sink (nil: NewSink).
	Sink    func(f *alerts.Forwarder, cfg Config) (alerts.Sink, error)
	Metrics *Metrics
}

// CursorName is the alerts.cursors row of a forwarder.
func CursorName(forwarderID string) string { return "fwd:" + forwarderID }

// Supervise runs one runner per live forwarder until ctx ends, starting new
// ones and stopping deleted ones as the list changes.
func Supervise(ctx context.Context, st Store, cfg Config, log *slog.Logger) error {
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Backoff.Initial <= 0 {
		cfg.Backoff = pipeline.Backoff{Initial: time.Second, Max: time.Minute}
	}
	if cfg.Sink == nil {
		cfg.Sink = NewSink
	}
	var wg sync.WaitGroup
	running := map[string]context.CancelFunc{}
	defer func() {
		for _, stop := range running {
			stop()
		}
		wg.Wait()
	}()
	for {
		list, err := st.Forwarders(ctx)
		if err != nil {
			log.Warn("list forwarders failed", "err", err)
		} else {
			live := map[string]bool{}
			for _, f := range list {
				live[f.ID] = true
				if running[f.ID] != nil {
					continue
				}
				rctx, stop := context.WithCancel(ctx)
				running[f.ID] = stop
				wg.Add(1)
				go func(f alerts.Forwarder) {
					defer wg.Done()
					run(rctx, st, f, cfg, log.With("forwarder", f.ID))
				}(f)
			}
			for id, stop := range running {
				if !live[id] {
					stop()
					delete(running, id)
				}
			}
		}
		if !pipeline.Sleep(ctx, cfg.Refresh) {
			return nil
		}
	}
}

// run feeds one forwarder until ctx ends. A sink that cannot be made (a
// bad CA, S3 configuration that does not load) is tried again after a
// backoff, and the backlog stays bounded meanwhile.
func run(ctx context.Context, st Store, f alerts.Forwarder, cfg Config, log *slog.Logger) {
	for attempt := 0; ; attempt++ {
		err := feed(ctx, st, f, cfg, log)
		if ctx.Err() != nil {
			return
		}
		log.Error("forwarder not started", "err", err, "attempt", attempt+1)
		cfg.Metrics.failed(f.ID)
		_ = st.Failed(ctx, f.ID, err.Error())
		skip(ctx, st, f.ID, cfg, log)
		if !pipeline.Sleep(ctx, cfg.Backoff.Wait(attempt)) {
			return
		}
	}
}

// skip applies the backlog bound; it returns the cursor it moved to, or
// ok false when it moved nothing.
func skip(ctx context.Context, st Store, id string, cfg Config, log *slog.Logger) (pos alerts.Position, ok bool) {
	if cfg.MaxBacklog <= 0 {
		return pos, false
	}
	pos, n, err := st.Skip(ctx, id, cfg.MaxBacklog)
	if err != nil {
		log.Warn("bound forwarder backlog failed", "err", err)
		return pos, false
	}
	if n == 0 {
		return pos, false
	}
	log.Error("forwarder backlog at its bound: oldest events skipped", "skipped", n, "max_backlog", cfg.MaxBacklog)
	cfg.Metrics.skipped(id, n)
	return pos, true
}

// feed reads after the forwarder's cursor, sends the rows its filters
// match, and moves the cursor only once they were sent (at least once). It
// returns only when ctx ends or when the sink cannot be made.
func feed(ctx context.Context, st Store, f alerts.Forwarder, cfg Config, log *slog.Logger) error {
	sink, err := cfg.Sink(&f, cfg)
	if err != nil {
		return err
	}
	defer sink.Close()
	var pos alerts.Position
	for {
		pos, err = st.Cursor(ctx, CursorName(f.ID))
		if err == nil {
			break
		}
		log.Warn("read forwarder cursor failed", "err", err)
		if !pipeline.Sleep(ctx, cfg.Poll) {
			return ctx.Err()
		}
	}
	failures := 0
	var matched []alerts.Event
	for ctx.Err() == nil {
		rows, err := st.Outbox(ctx, pos, cfg.Batch)
		if err != nil {
			log.Warn("read outbox failed", "err", err)
			pipeline.Sleep(ctx, cfg.Poll)
			continue
		}
		if len(rows) == 0 {
			cfg.Metrics.lag(f.ID, 0)
			pipeline.Sleep(ctx, cfg.Poll)
			continue
		}
		matched = matched[:0]
		for i := range rows {
			if f.Matches(&rows[i]) {
				matched = append(matched, rows[i])
			}
		}
		last := pos.After(rows)
		if len(matched) > 0 {
			if err := sink.Send(ctx, matched); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				cfg.Metrics.failed(f.ID)
				cfg.Metrics.lag(f.ID, time.Since(rows[0].ReceivedAt))
				log.Warn("forward failed", "err", err, "events", len(matched))
				_ = st.Failed(ctx, f.ID, err.Error())
				if p, ok := skip(ctx, st, f.ID, cfg, log); ok {
					pos = p
				}
				pipeline.Sleep(ctx, cfg.Backoff.Wait(failures))
				failures++
				continue
			}
		}
		failures = 0
		if err := st.Delivered(ctx, f.ID, last, len(matched)); err != nil {
			// Sent but not recorded: the batch is sent again (at least once).
			log.Warn("record forwarded batch failed", "err", err)
			continue
		}
		pos = last
		cfg.Metrics.delivered(f.ID, len(matched), time.Since(rows[len(rows)-1].ReceivedAt))
	}
	return ctx.Err()
}
