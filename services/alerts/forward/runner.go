package forward

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"threatview/alerts"
	"threatview/platform/pipeline"
)

// Store is what the runners need of the database.
type Store interface {
	// Forwarders lists the live forwarders (with their CA).
	Forwarders(ctx context.Context) ([]alerts.Forwarder, error)
	// Cursor returns the forwarder's position (zero before its first batch).
	Cursor(ctx context.Context, name string) (alerts.Position, error)
	// Outbox returns up to limit rows after pos, of finished transactions only.
	Outbox(ctx context.Context, after alerts.Position, limit int) ([]alerts.Event, error)
	// Delivered moves the forwarder's cursor to pos and adds n delivered.
	Delivered(ctx context.Context, forwarderID string, pos alerts.Position, n int) error
	// Failed counts a failed attempt with its message.
	Failed(ctx context.Context, forwarderID, msg string) error
}

// Config tunes the runners.
type Config struct {
	Batch   int           // rows read at once (default 500)
	Poll    time.Duration // wait when the outbox has nothing new (default 500 ms)
	Refresh time.Duration // how often the forwarder list is read (default 5 s)
	Version string
	Host    string
	S3      S3Config // for s3 forwarders
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

// run feeds one forwarder: read after its cursor, send the rows its filters
// match, move the cursor only once they were sent (at least once).
func run(ctx context.Context, st Store, f alerts.Forwarder, cfg Config, log *slog.Logger) {
	sink, err := NewSink(&f, cfg.Version, cfg.Host, cfg.S3)
	if err != nil {
		log.Error("forwarder not started", "err", err)
		_ = st.Failed(ctx, f.ID, err.Error())
		return
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
			return
		}
	}
	backoff := pipeline.Backoff{Initial: time.Second, Max: time.Minute}
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
		last := rows[len(rows)-1].Pos
		if len(matched) > 0 {
			if err := sink.Send(ctx, matched); err != nil {
				if ctx.Err() != nil {
					return
				}
				cfg.Metrics.failed(f.ID)
				cfg.Metrics.lag(f.ID, time.Since(rows[0].ReceivedAt))
				log.Warn("forward failed", "err", err, "events", len(matched))
				_ = st.Failed(ctx, f.ID, err.Error())
				pipeline.Sleep(ctx, backoff.Wait(failures))
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
}
