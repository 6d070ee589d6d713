// Package consumer turns broker deliveries into batches: it splits each
// message into the requests it carries, dead-letters alone each request
// that can never be stored (its own body, the reason in a header), writes
// the events of every other request of the batch in one transaction
// (retrying transient database errors with backoff, never dead-lettering
// for them) and acks every message only after the commit.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"threatview/platform/mq"
	"threatview/platform/wire"
	"threatview/processor"
)

// Publisher sends a message durably (mq.Publisher).
type Publisher interface {
	Send(ctx context.Context, dest string, body []byte, headers map[string]string) error
}

// Config tunes a Consumer.
type Config struct {
	Queue     string        // consumed destination; poison goes to wire.DeadLetter(Queue)
	MaxEvents int           // a batch closes at this many events...
	MaxWait   time.Duration // ...or this long after its first message
	// AfterCommit, when set, runs after each commit and before the acks.
	// Only tests use it (to crash the process in that window).
	AfterCommit func()
}

// Consumer batches deliveries into the Store.
type Consumer struct {
	store   processor.Store
	dlq     Publisher
	cfg     Config
	metrics *processor.Metrics
	log     *slog.Logger
}

// New returns a Consumer writing to store and dead-lettering through dlq.
func New(store processor.Store, dlq Publisher, cfg Config, m *processor.Metrics, log *slog.Logger) *Consumer {
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = 1
	}
	return &Consumer{store: store, dlq: dlq, cfg: cfg, metrics: m, log: log}
}

// batch is what one transaction handles.
type batch struct {
	deliveries []*mq.Delivery // every message of the batch, acked together at the end
	units      []unit         // the good requests, in order
	events     []wire.Event   // the events of the good requests, in order
	poison     []poison       // requests (or whole messages) to dead-letter
}

// unit is one request's place in events.
type unit struct {
	req        *wire.Request
	start, end int
}

// poison is what goes to the dead-letter queue: one request alone, or a
// whole message that cannot be split into requests.
type poison struct {
	body      []byte
	reason    string // the metric label: envelope, unstorable, refused, message
	err       string
	requestID string
	appID     string
	events    int
}

func (b *batch) reset() {
	clear(b.deliveries)
	b.deliveries = b.deliveries[:0]
	clear(b.units)
	b.units = b.units[:0]
	clear(b.events)
	b.events = b.events[:0]
	clear(b.poison)
	b.poison = b.poison[:0]
}

// Run consumes in until ctx ends or in is closed. On cancellation it
// finishes the batch in hand (write, ack) before returning, so in must stay
// connected until Run returns. It returns nil.
func (c *Consumer) Run(ctx context.Context, in <-chan *mq.Delivery) error {
	b := &batch{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		b.reset()
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-in:
			if !ok {
				return nil
			}
			c.add(b, d)
		}
		open := c.gather(ctx, in, b, timer)
		c.handle(ctx, b)
		if !open {
			return nil
		}
	}
}

// gather adds deliveries to b until it holds MaxEvents events, MaxWait has
// passed, ctx ends or in closes (then it returns false).
func (c *Consumer) gather(ctx context.Context, in <-chan *mq.Delivery, b *batch, timer *time.Timer) bool {
	if len(b.events) >= c.cfg.MaxEvents {
		return true
	}
	if c.cfg.MaxWait <= 0 {
		for {
			select {
			case d, ok := <-in:
				if !ok {
					return false
				}
				if c.add(b, d); len(b.events) >= c.cfg.MaxEvents {
					return true
				}
			default:
				return true
			}
		}
	}
	timer.Reset(c.cfg.MaxWait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-timer.C:
			return true
		case d, ok := <-in:
			if !ok {
				return false
			}
			if c.add(b, d); len(b.events) >= c.cfg.MaxEvents {
				return true
			}
		}
	}
}

// add decodes d into b: the events of each good request, and a poison
// entry for each request that cannot be decoded or stored (or for the whole
// message when it cannot be split into requests).
func (c *Consumer) add(b *batch, d *mq.Delivery) {
	b.deliveries = append(b.deliveries, d)
	reqs, err := wire.DecodeEvents(d.Body)
	if err != nil {
		b.poison = append(b.poison, poison{body: d.Body, reason: "message", err: truncate(err.Error(), maxReason)})
		return
	}
	now := time.Now()
	for i := range reqs {
		r := &reqs[i]
		reason, err := "envelope", r.Err
		for k := 0; err == nil && k < len(r.Events); k++ {
			if err = processor.CheckStorable(&r.Events[k], now); err != nil {
				reason, err = "unstorable", fmt.Errorf("event %d: %w", k, err)
			}
		}
		if err != nil {
			b.poison = append(b.poison, poison{body: r.Body(), reason: reason, err: truncate(err.Error(), maxReason),
				requestID: r.RequestID, appID: r.AppID, events: len(r.Events)})
			continue
		}
		start := len(b.events)
		b.events = append(b.events, r.Events...)
		b.units = append(b.units, unit{req: r, start: start, end: len(b.events)})
	}
}

// handle dead-letters the poison, writes the events of the good requests
// and acks every message of the batch. If ctx ends before that is done
// nothing more is acked: the broker redelivers, and the store skips what
// was already written.
func (c *Consumer) handle(ctx context.Context, b *batch) {
	start := time.Now()
	for _, p := range b.poison {
		if !c.deadLetter(ctx, p) {
			return
		}
	}
	if len(b.events) > 0 {
		res, err := c.write(ctx, b.events)
		if errors.Is(err, processor.ErrUnstorable) {
			// Postgres refuses a row that passed CheckStorable: find its
			// request by writing request by request.
			res, err = c.isolate(ctx, b)
		}
		if err != nil {
			return
		}
		c.metrics.EventsStored.Add(float64(res.Stored))
		c.metrics.Duplicates.Add(float64(res.Duplicates))
		c.metrics.BatchEvents.Observe(float64(len(b.events)))
		if c.cfg.AfterCommit != nil {
			c.cfg.AfterCommit()
		}
	}
	acked := 0
	for _, d := range b.deliveries {
		if err := d.Ack(); err != nil {
			c.metrics.AckErrors.Inc()
			continue
		}
		acked++
	}
	if acked < len(b.deliveries) {
		// The broker redelivers them; the store skips the duplicates.
		c.log.Warn("ack failed after commit", "messages", len(b.deliveries), "acked", acked)
	}
	c.metrics.BatchSeconds.Observe(time.Since(start).Seconds())
}

// write retries the batch with backoff until it commits, Postgres refuses
// its data (an error wrapping ErrUnstorable, returned at once) or ctx ends
// (ctx's error). The attempt in hand runs to completion even if ctx ends
// meanwhile.
func (c *Consumer) write(ctx context.Context, events []wire.Event) (processor.WriteResult, error) {
	backoff := 100 * time.Millisecond
	for {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		res, err := c.store.WriteBatch(wctx, events)
		cancel()
		if err == nil || errors.Is(err, processor.ErrUnstorable) {
			return res, err
		}
		c.metrics.WriteErrors.Inc()
		c.log.Warn("batch write failed, retrying", "events", len(events), "err", err, "backoff", backoff.String())
		if !sleep(ctx, backoff) {
			return res, ctx.Err()
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// isolate writes b's requests again in one transaction, each under its
// own savepoint, dead-letters each one Postgres refuses and stores every
// other one. Transient errors are retried with backoff; it returns ctx's
// error if ctx ends first.
func (c *Consumer) isolate(ctx context.Context, b *batch) (processor.WriteResult, error) {
	requests := make([][]wire.Event, len(b.units))
	for i, u := range b.units {
		requests[i] = b.events[u.start:u.end]
	}
	backoff := 100 * time.Millisecond
	for {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		res, refused, err := c.store.WriteRequests(wctx, requests)
		cancel()
		if err == nil {
			for i, u := range b.units {
				rerr, ok := refused[i]
				if !ok {
					continue
				}
				p := poison{body: u.req.Body(), reason: "refused", err: truncate(rerr.Error(), maxReason),
					requestID: u.req.RequestID, appID: u.req.AppID, events: u.end - u.start}
				if !c.deadLetter(ctx, p) {
					// Stored already: the redelivery skips the stored
					// requests and dead-letters the refused one again.
					return res, ctx.Err()
				}
			}
			return res, nil
		}
		c.metrics.WriteErrors.Inc()
		c.log.Warn("request-by-request write failed, retrying", "requests", len(requests), "err", err, "backoff", backoff.String())
		if !sleep(ctx, backoff) {
			return res, ctx.Err()
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// deadLetter sends p to the dead-letter queue, retrying until the broker
// takes it or ctx ends (then it reports false). The message p came from is
// acked with the rest of its batch.
func (c *Consumer) deadLetter(ctx context.Context, p poison) bool {
	dest := wire.DeadLetter(c.cfg.Queue)
	headers := map[string]string{wire.HeaderDeadLetterReason: p.err}
	backoff := 100 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := c.dlq.Send(sctx, dest, p.body, headers)
		cancel()
		if err == nil {
			c.metrics.DeadLettered.Inc()
			if p.reason == "message" {
				c.log.Warn("message dead-lettered", "destination", dest, "reason", p.err)
			} else {
				c.metrics.Isolated.WithLabelValues(p.reason).Inc()
				c.log.Warn("request isolated", "destination", dest, "request_id", p.requestID,
					"app_id", p.appID, "events", p.events, "kind", p.reason, "reason", p.err)
			}
			return true
		}
		c.log.Warn("dead-letter send failed, retrying", "destination", dest, "err", err, "backoff", backoff.String())
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// maxReason bounds the dead-letter reason header: the error may quote the
// message, and a header is no place for kilobytes.
const maxReason = 512

// truncate cuts s to at most n bytes on a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
