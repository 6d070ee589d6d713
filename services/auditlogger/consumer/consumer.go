// Package consumer is the audit worker's loop: it gathers deliveries from
// the audit queue into batches, stores each batch in one transaction, and
// acknowledges the messages only after the commit. A message that can never
// be stored goes to the dead-letter queue with its reason and is then
// acknowledged; a database error is retried with backoff and never
// dead-letters anything.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/auditlogger"
	"threatview/platform/mq"
	"threatview/platform/wire"
)

// Inserter stores a batch (auditlogger.Store's write half).
type Inserter interface {
	Insert(ctx context.Context, records []wire.AuditRecord) (int, error)
}

// Sender publishes a persistent message (mq.Publisher), used for the DLQ.
type Sender interface {
	Send(ctx context.Context, dest string, body []byte, headers map[string]string) error
}

// Options tune the batching.
type Options struct {
	Queue        string        // the consumed queue; its DLQ is wire.DeadLetter(Queue)
	BatchMax     int           // records per transaction, at most (a message is never split)
	BatchMaxWait time.Duration // how long a batch waits to fill
	Prefetch     int           // deliveries the broker hands over before an ack
	FlushTimeout time.Duration // how long the last batch may take at shutdown
}

// Consumer stores audit batches from the queue.
type Consumer struct {
	store Inserter
	dlq   Sender
	opts  Options
	log   *slog.Logger
	m     metrics
}

type metrics struct {
	messages   *prometheus.CounterVec
	inserted   prometheus.Counter
	duplicates prometheus.Counter
	dbErrors   prometheus.Counter
	batchRows  prometheus.Histogram
	insertDur  prometheus.Histogram
}

// New returns a Consumer; its metrics are registered on reg when not nil.
func New(store Inserter, dlq Sender, opts Options, reg prometheus.Registerer, log *slog.Logger) *Consumer {
	if opts.BatchMax < 1 {
		opts.BatchMax = 1000
	}
	if opts.Prefetch < 1 {
		opts.Prefetch = 1
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 10 * time.Second
	}
	c := &Consumer{store: store, dlq: dlq, opts: opts, log: log, m: metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "auditworker_messages_total",
			Help: "Messages finished, by outcome (stored, dead_lettered).",
		}, []string{"outcome"}),
		inserted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "auditworker_records_inserted_total",
			Help: "Audit records newly stored.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "auditworker_records_duplicate_total",
			Help: "Audit records received again and skipped (already stored).",
		}),
		dbErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "auditworker_db_errors_total",
			Help: "Failed insert transactions (retried).",
		}),
		batchRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "auditworker_batch_records",
			Help:    "Records per insert transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
		insertDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "auditworker_insert_seconds",
			Help:    "Duration of one insert transaction.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 10),
		}),
	}}
	if reg != nil {
		reg.MustRegister(c.m.messages, c.m.inserted, c.m.duplicates, c.m.dbErrors, c.m.batchRows, c.m.insertDur)
	}
	return c
}

type held struct {
	d       *mq.Delivery
	records []wire.AuditRecord
}

// Run consumes deliveries until ctx ends or the channel closes. On the way
// out it stores and acknowledges the batch in hand within FlushTimeout.
func (c *Consumer) Run(ctx context.Context, deliveries <-chan *mq.Delivery) error {
	batch := make([]held, 0, c.opts.Prefetch)
	for {
		var first *mq.Delivery
		select {
		case d, ok := <-deliveries:
			if !ok {
				return nil
			}
			first = d
		case <-ctx.Done():
			return nil
		}
		batch = batch[:0]
		rows := 0
		took := 1
		var err error
		if batch, rows, err = c.take(ctx, batch, rows, first); err != nil {
			return err
		}
		closed := false
		timer := time.NewTimer(c.opts.BatchMaxWait)
	collect:
		for rows < c.opts.BatchMax && took < c.opts.Prefetch {
			select {
			case d, ok := <-deliveries:
				if !ok {
					closed = true
					break collect
				}
				took++
				if batch, rows, err = c.take(ctx, batch, rows, d); err != nil {
					timer.Stop()
					return err
				}
			case <-timer.C:
				break collect
			case <-ctx.Done():
				break collect
			}
		}
		timer.Stop()
		if err := c.flush(ctx, batch, rows); err != nil {
			return err
		}
		if closed || ctx.Err() != nil {
			return nil
		}
	}
}

// take decodes one delivery into the batch. A record that can never be
// stored is dead-lettered alone (its own message, the reason in a header)
// and the message's other records are kept: the collector's messages carry
// the records of several requests, and one must not cost the others their
// audit rows. A message that is not an audit batch at all, or whose every
// record is bad, is dead-lettered and acknowledged.
func (c *Consumer) take(ctx context.Context, batch []held, rows int, d *mq.Delivery) ([]held, int, error) {
	items, err := wire.DecodeAuditItems(d.Body)
	if err != nil {
		return batch, rows, c.deadLetter(ctx, d, err.Error())
	}
	good := make([]wire.AuditRecord, 0, len(items))
	var bad []int
	reasons := make([]string, len(items))
	for i := range items {
		err := items[i].Err
		if err == nil {
			auditlogger.Normalize(&items[i].Record, true)
			if verr := auditlogger.Validate(&items[i].Record, i); verr != nil {
				err = fmt.Errorf("%w: %v", wire.ErrInvalidEnvelope, verr)
			}
		}
		if err != nil {
			bad = append(bad, i)
			reasons[i] = err.Error()
			continue
		}
		good = append(good, items[i].Record)
	}
	if len(good) == 0 {
		return batch, rows, c.deadLetter(ctx, d, reasons[bad[0]])
	}
	for _, i := range bad {
		if err := c.sendDead(ctx, wire.AuditBody(items[i].Raw), reasons[i]); err != nil {
			return batch, rows, err
		}
	}
	return append(batch, held{d: d, records: good}), rows + len(good), nil
}

// deadLetter moves a message that can never be stored to the DLQ, then
// acknowledges it. It retries the DLQ send until ctx ends; the message is
// then left unacknowledged and comes back later.
func (c *Consumer) deadLetter(ctx context.Context, d *mq.Delivery, reason string) error {
	if err := c.sendDead(ctx, d.Body, reason); err != nil {
		return err
	}
	if err := d.Ack(); err != nil {
		c.log.Warn("ack of dead-lettered message failed", "err", err)
	}
	return nil
}

// sendDead sends body to the DLQ with reason, retrying until ctx ends.
func (c *Consumer) sendDead(ctx context.Context, body []byte, reason string) error {
	const maxReason = 512
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	dest := wire.DeadLetter(c.opts.Queue)
	headers := map[string]string{wire.HeaderDeadLetterReason: reason}
	err := retry(ctx, func() error { return c.dlq.Send(ctx, dest, body, headers) }, func(err error, wait time.Duration) {
		c.log.Warn("dead-letter send failed, retrying", "err", err, "backoff", wait.String())
	})
	if err != nil {
		return fmt.Errorf("dead-letter message: %w", err)
	}
	c.log.Warn("message dead-lettered", "reason", reason, "dlq", dest)
	c.m.messages.WithLabelValues("dead_lettered").Inc()
	return nil
}

// flush stores the batch (retrying database errors) and acknowledges its
// messages. It runs under a fresh context once ctx has ended, so the batch
// in hand is finished at shutdown.
func (c *Consumer) flush(ctx context.Context, batch []held, rows int) error {
	if len(batch) == 0 {
		return nil
	}
	records := batch[0].records
	if len(batch) > 1 {
		records = make([]wire.AuditRecord, 0, rows)
		for _, h := range batch {
			records = append(records, h.records...)
		}
	}
	fctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.Background(), c.opts.FlushTimeout)
		defer cancel()
	}
	var inserted int
	err := retry(fctx, func() error {
		start := time.Now()
		n, err := c.store.Insert(fctx, records)
		c.m.insertDur.Observe(time.Since(start).Seconds())
		inserted = n
		return err
	}, func(err error, wait time.Duration) {
		c.m.dbErrors.Inc()
		c.log.Warn("insert failed, retrying", "err", err, "records", len(records), "backoff", wait.String())
	})
	if err != nil {
		// Not acknowledged: the broker redelivers after a reconnect.
		return fmt.Errorf("store batch of %d records: %w", len(records), err)
	}
	c.m.batchRows.Observe(float64(len(records)))
	c.m.inserted.Add(float64(inserted))
	c.m.duplicates.Add(float64(len(records) - inserted))
	for _, h := range batch {
		if err := h.d.Ack(); err != nil {
			// Stored already; the redelivery is skipped as a duplicate.
			c.log.Warn("ack failed", "err", err)
		}
	}
	c.m.messages.WithLabelValues("stored").Add(float64(len(batch)))
	c.log.Debug("batch stored", "records", len(records), "inserted", inserted, "messages", len(batch))
	return nil
}

// retry runs f until it succeeds or ctx ends, backing off from 100 ms to 5 s.
func retry(ctx context.Context, f func() error, onErr func(error, time.Duration)) error {
	wait := 100 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		onErr(err, wait)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}
