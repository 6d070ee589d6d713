// Package pipeline is the durable message path written once for every
// worker: a batch Consumer (decode, dead-letter what can never be stored,
// write in one transaction with retries, ack after the commit), a Leader
// loop over a small Locker interface, and the one retry policy (Retry,
// Every, Backoff). A worker supplies only its domain code: how to decode a
// message and how to write a batch.
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/mq"
	"threatview/platform/wire"
)

// Part is one independently storable piece of a message: the events of one
// collector request, the good audit records of one message. One part is
// stored or dead-lettered whole.
type Part[T any] struct {
	Items []T
	// Body returns the part as a message of its own, sent to the dead-letter
	// queue if the database refuses the part.
	Body func() []byte
	// Attrs are logged when the part is dead-lettered (request_id, ...).
	Attrs []any
}

// Reject is a part that can never be stored: it is dead-lettered alone
// (Body, the reason in a header) while the rest of its message is stored.
type Reject struct {
	Body  []byte
	Kind  string // the Isolated metric's label: envelope, unstorable, ...
	Err   error  // the reason
	Attrs []any  // logged with it
}

// Result tells what one write stored.
type Result struct {
	Stored     int // items stored now
	Duplicates int // items skipped: already stored, or repeated in the batch
}

// Handler is a worker's domain code.
type Handler[T any] struct {
	// Decode splits a message into the parts to store and the parts to
	// dead-letter alone. An error dead-letters the whole message (kind
	// "message").
	Decode func(body []byte) ([]Part[T], []Reject, error)
	// Write stores items in one transaction; they are durable when it
	// returns nil. Errors are retried with backoff, except those Permanent
	// reports as such.
	Write func(ctx context.Context, items []T) (Result, error)
	// Permanent, when set, reports whether a Write error means the data
	// itself can never be stored (retrying cannot help). The parts are then
	// written again with WriteParts to find the culprits.
	Permanent func(error) bool
	// WriteParts stores parts in one transaction except those the database
	// refuses: refused maps their indexes to the reasons; they are
	// dead-lettered (kind "refused") and every other part is durable. An
	// error means nothing was stored and is retried. When nil, every part of
	// a batch refused for good is dead-lettered.
	WriteParts func(ctx context.Context, parts [][]T) (res Result, refused map[int]error, err error)
}

// Metrics are the Consumer's collectors, named by the worker (the names are
// part of its contract: dashboards and alerts read them). Each may be nil.
type Metrics struct {
	DeadLettered   prometheus.Counter     // messages sent to the dead-letter queue
	Isolated       *prometheus.CounterVec // parts dead-lettered alone, by kind (label "reason")
	Stored         prometheus.Counter     // messages whose parts were committed
	Items          prometheus.Counter     // items stored now (Result.Stored)
	Duplicates     prometheus.Counter     // items skipped (Result.Duplicates)
	WriteErrors    prometheus.Counter     // failed write attempts (each retried)
	AckErrors      prometheus.Counter     // acks that failed after a commit
	BatchItems     prometheus.Observer    // items per committed batch
	BatchSeconds   prometheus.Observer    // from a batch closing to its acks, retries included
	AttemptSeconds prometheus.Observer    // one write attempt
}

// Config tunes a Consumer.
type Config struct {
	Queue       string        // consumed destination; dead letters go to wire.DeadLetter(Queue)
	MaxItems    int           // a batch closes at this many items...
	MaxMessages int           // ...or this many messages (0: no limit)...
	MaxWait     time.Duration // ...or this long after its first message
	// FlushTimeout is how long the batch in hand may still be retried once
	// the consumer's context ends (0: only the attempt in hand finishes).
	FlushTimeout time.Duration
	// WriteTimeout bounds one Write attempt (default 30 s; WriteParts gets
	// twice as long).
	WriteTimeout time.Duration
	Backoff      Backoff // retry policy (default DefaultBackoff)
	PartName     string  // in the logs: "request isolated" (default "part")
	// AfterCommit, when set, runs after each commit and before the acks.
	// Only tests use it (to crash the process in that window).
	AfterCommit func()
	Metrics     Metrics
}

// Consumer batches deliveries into a Handler's writes.
type Consumer[T any] struct {
	h   Handler[T]
	dlq mq.Sender
	cfg Config
	log *slog.Logger
}

// NewConsumer returns a Consumer writing through h and dead-lettering
// through dlq.
func NewConsumer[T any](h Handler[T], dlq mq.Sender, cfg Config, log *slog.Logger) *Consumer[T] {
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = 1
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.PartName == "" {
		cfg.PartName = "part"
	}
	return &Consumer[T]{h: h, dlq: dlq, cfg: cfg, log: log}
}

// batch is what one transaction handles.
type batch[T any] struct {
	deliveries []*mq.Delivery // every message of the batch, acked together at the end
	stored     int            // messages with at least one part to store
	parts      []Part[T]      // the good parts, in order
	bounds     [][2]int       // each part's place in items
	items      []T            // the items of the good parts, in order
	rejects    []Reject       // parts (or whole messages) to dead-letter
}

func (b *batch[T]) reset() {
	clear(b.deliveries)
	b.deliveries = b.deliveries[:0]
	b.stored = 0
	clear(b.parts)
	b.parts = b.parts[:0]
	b.bounds = b.bounds[:0]
	clear(b.items)
	b.items = b.items[:0]
	clear(b.rejects)
	b.rejects = b.rejects[:0]
}

// full reports whether b must close.
func (c *Consumer[T]) full(b *batch[T]) bool {
	return len(b.items) >= c.cfg.MaxItems || (c.cfg.MaxMessages > 0 && len(b.deliveries) >= c.cfg.MaxMessages)
}

// Run consumes in until ctx ends or in is closed. While one batch is
// written, the next one is gathered and decoded (at most two batches in
// hand), so decoding never waits for the database nor the database for
// decoding. Batches are still written, and acked, one after the other in
// delivery order. On cancellation it finishes the batches in hand (write,
// ack; retried for FlushTimeout) before returning, so in must stay
// connected until Run returns. It returns nil.
func (c *Consumer[T]) Run(ctx context.Context, in <-chan *mq.Delivery) error {
	cur, next := &batch[T]{}, &batch[T]{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	if !c.first(ctx, in, cur) {
		return nil
	}
	open := c.gather(ctx, in, cur, timer)
	for {
		done := make(chan bool, 1)
		go func(b *batch[T]) { done <- c.handle(ctx, b) }(cur)
		next.reset()
		handled, finished := false, false
		if open {
			select {
			case <-ctx.Done():
			case handled = <-done:
				finished = true
			case d, ok := <-in:
				if !ok {
					open = false
					break
				}
				c.add(next, d)
				open = c.gather(ctx, in, next, timer)
			}
		}
		if !finished {
			handled = <-done
		}
		// A batch left unfinished is never acked, and since acks are
		// cumulative no later batch may be acked either: stop.
		if !handled {
			return nil
		}
		if len(next.deliveries) == 0 {
			if !open || !c.first(ctx, in, next) {
				return nil
			}
			open = c.gather(ctx, in, next, timer)
		}
		cur, next = next, cur
	}
}

// first waits for the first delivery of b; false when ctx ends or in
// closes first.
func (c *Consumer[T]) first(ctx context.Context, in <-chan *mq.Delivery, b *batch[T]) bool {
	select {
	case <-ctx.Done():
		return false
	case d, ok := <-in:
		if !ok {
			return false
		}
		c.add(b, d)
		return true
	}
}

// gather adds deliveries to b until it is full, MaxWait has passed, ctx
// ends or in closes (then it returns false).
func (c *Consumer[T]) gather(ctx context.Context, in <-chan *mq.Delivery, b *batch[T], timer *time.Timer) bool {
	if c.full(b) {
		return true
	}
	if c.cfg.MaxWait <= 0 {
		for {
			select {
			case d, ok := <-in:
				if !ok {
					return false
				}
				if c.add(b, d); c.full(b) {
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
			if c.add(b, d); c.full(b) {
				return true
			}
		}
	}
}

// add decodes d into b.
func (c *Consumer[T]) add(b *batch[T], d *mq.Delivery) {
	b.deliveries = append(b.deliveries, d)
	parts, rejects, err := c.h.Decode(d.Body)
	if err != nil {
		b.rejects = append(b.rejects, Reject{Body: d.Body, Kind: "message", Err: err})
		return
	}
	b.rejects = append(b.rejects, rejects...)
	if len(parts) > 0 {
		b.stored++
	}
	for _, p := range parts {
		start := len(b.items)
		b.items = append(b.items, p.Items...)
		b.parts = append(b.parts, p)
		b.bounds = append(b.bounds, [2]int{start, len(b.items)})
	}
}

// handle dead-letters the rejects, writes the items of the good parts and
// acks every message of the batch. If it cannot finish (ctx ended, and
// FlushTimeout after it) nothing more is acked and it returns false: the
// broker redelivers, and the store skips what was already written.
func (c *Consumer[T]) handle(ctx context.Context, b *batch[T]) bool {
	start := time.Now()
	ctx, cancel := drain(ctx, c.cfg.FlushTimeout)
	defer cancel()
	for _, r := range b.rejects {
		if !c.deadLetter(ctx, r) {
			return false
		}
	}
	m := &c.cfg.Metrics
	if len(b.items) > 0 {
		res, err := c.write(ctx, b)
		if err != nil {
			return false
		}
		add(m.Items, res.Stored)
		add(m.Duplicates, res.Duplicates)
		if m.BatchItems != nil {
			m.BatchItems.Observe(float64(len(b.items)))
		}
		if c.cfg.AfterCommit != nil {
			c.cfg.AfterCommit()
		}
	}
	// One cumulative ack per connection: every earlier delivery was acked
	// with its own batch, or Run has stopped (handle's early returns).
	acked := mq.AckThrough(b.deliveries)
	if acked < len(b.deliveries) {
		add(m.AckErrors, len(b.deliveries)-acked)
		// The broker redelivers them; the store skips the duplicates.
		c.log.Warn("ack failed after commit", "messages", len(b.deliveries), "acked", acked)
	}
	add(m.Stored, b.stored)
	if m.BatchSeconds != nil {
		m.BatchSeconds.Observe(time.Since(start).Seconds())
	}
	c.log.Debug("batch stored", "items", len(b.items), "messages", len(b.deliveries))
	return true
}

// write stores b's items, retrying transient errors until they commit or
// ctx ends (ctx's error). When the data is refused for good it writes part
// by part and dead-letters the parts refused. The attempt in hand runs to
// completion even if ctx ends meanwhile.
func (c *Consumer[T]) write(ctx context.Context, b *batch[T]) (Result, error) {
	var res Result
	err := Retry(ctx, c.cfg.Backoff, func() error {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.WriteTimeout)
		defer cancel()
		start := time.Now()
		var err error
		res, err = c.h.Write(wctx, b.items)
		if c.cfg.Metrics.AttemptSeconds != nil {
			c.cfg.Metrics.AttemptSeconds.Observe(time.Since(start).Seconds())
		}
		if err != nil && c.h.Permanent != nil && c.h.Permanent(err) {
			return Permanent(err)
		}
		return err
	}, func(err error, wait time.Duration) {
		add(c.cfg.Metrics.WriteErrors, 1)
		c.log.Warn("batch write failed, retrying", "items", len(b.items), "err", err, "backoff", wait.String())
	})
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	// Refused for good: find the parts the database refuses.
	return c.isolate(ctx, b)
}

// isolate writes b's parts again with WriteParts, dead-letters each one
// refused and stores every other one. Transient errors are retried; it
// returns ctx's error if ctx ends first.
func (c *Consumer[T]) isolate(ctx context.Context, b *batch[T]) (Result, error) {
	parts := make([][]T, len(b.parts))
	for i, bd := range b.bounds {
		parts[i] = b.items[bd[0]:bd[1]]
	}
	var res Result
	var refused map[int]error
	if c.h.WriteParts == nil {
		refused = make(map[int]error, len(parts))
		for i := range parts {
			refused[i] = fmt.Errorf("batch refused by the store")
		}
	} else {
		err := Retry(ctx, c.cfg.Backoff, func() error {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.cfg.WriteTimeout)
			defer cancel()
			var err error
			res, refused, err = c.h.WriteParts(wctx, parts)
			return err
		}, func(err error, wait time.Duration) {
			add(c.cfg.Metrics.WriteErrors, 1)
			c.log.Warn(c.cfg.PartName+"-by-"+c.cfg.PartName+" write failed, retrying", "parts", len(parts), "err", err, "backoff", wait.String())
		})
		if err != nil {
			return res, err
		}
	}
	for i, p := range b.parts {
		rerr, ok := refused[i]
		if !ok {
			continue
		}
		r := Reject{Body: p.Body(), Kind: "refused", Err: rerr, Attrs: p.Attrs}
		if !c.deadLetter(ctx, r) {
			// Stored already: the redelivery skips the stored parts and
			// dead-letters the refused one again.
			return res, ctx.Err()
		}
	}
	return res, nil
}

// deadLetter sends r to the dead-letter queue, retrying until the broker
// takes it or ctx ends (then it reports false). The message r came from is
// acked with the rest of its batch.
func (c *Consumer[T]) deadLetter(ctx context.Context, r Reject) bool {
	dest := wire.DeadLetter(c.cfg.Queue)
	reason := wire.Truncate(r.Err.Error(), maxReason)
	headers := map[string]string{wire.HeaderDeadLetterReason: reason}
	err := Retry(ctx, c.cfg.Backoff, func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return c.dlq.Send(sctx, dest, r.Body, headers)
	}, func(err error, wait time.Duration) {
		c.log.Warn("dead-letter send failed, retrying", "destination", dest, "err", err, "backoff", wait.String())
	})
	if err != nil {
		return false
	}
	m := &c.cfg.Metrics
	add(m.DeadLettered, 1)
	if r.Kind == "message" {
		c.log.Warn("message dead-lettered", "destination", dest, "reason", reason)
		return true
	}
	if m.Isolated != nil {
		m.Isolated.WithLabelValues(r.Kind).Inc()
	}
	attrs := append([]any{"destination", dest}, r.Attrs...)
	c.log.Warn(c.cfg.PartName+" isolated", append(attrs, "kind", r.Kind, "reason", reason)...)
	return true
}

// drain returns a context that ends grace after ctx ends (at once when
// grace is 0): the batch in hand may still be finished meanwhile.
func drain(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	if grace <= 0 {
		return context.WithCancel(ctx)
	}
	d, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(d, func() { t.Stop() })
	})
	return d, func() { stop(); cancel() }
}

func add(c prometheus.Counter, n int) {
	if c != nil && n > 0 {
		c.Add(float64(n))
	}
}

// maxReason bounds the dead-letter reason header: the error may quote the
// message, and a header is no place for kilobytes.
const maxReason = 512
