// Package broker publishes audit records to the audit queue with the
// platform's group commit (pipeline.Group): the records of concurrent posts
// travel in one persistent message, and each post returns once the message
// carrying it has the broker's receipt. Posts that arrive while every
// sender is busy join the next message, so under load messages grow instead
// of queueing up.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/auditlogger"
	"threatview/platform/mq"
	"threatview/platform/pipeline"
	"threatview/platform/wire"
)

// Options tune a GroupPublisher.
type Options struct {
	Window          time.Duration // how long a message waits for more posts
	MaxMessageBytes int           // a message stops growing past this size (default 1 MiB)
	Concurrency     int           // messages in flight at once
	SendTimeout     time.Duration // give up on one send after this long (default 10 s)
}

// GroupPublisher implements auditlogger.Publisher with group commit.
type GroupPublisher struct {
	group *pipeline.Group
}

var _ auditlogger.Publisher = (*GroupPublisher)(nil)

// ErrClosed is returned by Publish after Close (wrapped with
// auditlogger.ErrUnavailable).
var ErrClosed = pipeline.ErrClosed

// NewGroupPublisher returns a publisher sending to dest; Close stops it.
func NewGroupPublisher(sender mq.Sender, dest string, opts Options, reg prometheus.Registerer, log *slog.Logger) *GroupPublisher {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 1 << 20
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 10 * time.Second
	}
	observe := newMetrics(reg, log)
	send := func(ctx context.Context, b pipeline.Batch) error {
		if err := sender.Send(ctx, dest, b.Body, nil); err != nil {
			return fmt.Errorf("publish %d audit records: %w: %w", b.Items, auditlogger.ErrUnavailable, err)
		}
		return nil
	}
	return &GroupPublisher{group: pipeline.NewGroup(pipeline.GroupOptions{
		Prefix:      wire.AuditPrefix,
		Suffix:      wire.AuditSuffix,
		Window:      opts.Window,
		MaxBytes:    opts.MaxMessageBytes,
		MaxItems:    1 << 30, // bytes cap a message
		Concurrency: opts.Concurrency,
		// The group's timeout also counts the window and the wait for a
		// free sender.
		Timeout:     opts.Window + opts.SendTimeout,
		Unavailable: auditlogger.ErrUnavailable,
		Observe:     observe,
	}, send)}
}

// Publish implements auditlogger.Publisher.
func (p *GroupPublisher) Publish(ctx context.Context, records []wire.AuditRecord) error {
	if len(records) == 0 {
		return nil
	}
	frag, err := encodeRecords(records)
	if err != nil {
		return fmt.Errorf("encode %d audit records: %w", len(records), err)
	}
	if err := p.group.Add(frag, len(records)).WaitContext(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return fmt.Errorf("publish audit records: %w: %w", auditlogger.ErrUnavailable, err)
		}
		return err
	}
	return nil
}

// Close stops taking posts, sends what is gathered and waits for the sends.
func (p *GroupPublisher) Close() { p.group.Close() }

func encodeRecords(records []wire.AuditRecord) ([]byte, error) {
	var b []byte
	for i := range records {
		one, err := json.Marshal(&records[i])
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, one...)
	}
	return b, nil
}

// newMetrics registers the publisher's metrics with reg (when not nil) and
// returns the group's Observe.
func newMetrics(reg prometheus.Registerer, log *slog.Logger) func(requests, items, bytes int, d time.Duration, err error) {
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "auditlogger_broker_messages_total",
		Help: "Broker messages sent, by result (ok, error).",
	}, []string{"result"})
	records := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "auditlogger_records_published_total",
		Help: "Audit records made durable on the broker.",
	})
	perMsg := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "auditlogger_posts_per_message",
		Help:    "POSTs coalesced into one broker message.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})
	sendDur := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "auditlogger_broker_send_seconds",
		Help:    "Time from send to broker receipt.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 5},
	})
	if reg != nil {
		reg.MustRegister(messages, records, perMsg, sendDur)
	}
	return func(requests, items, _ int, d time.Duration, err error) {
		if !errors.Is(err, pipeline.ErrTimeout) {
			sendDur.Observe(d.Seconds())
		}
		perMsg.Observe(float64(requests))
		if err != nil {
			messages.WithLabelValues("error").Inc()
			log.Warn("audit message not confirmed by the broker", "err", err, "records", items, "posts", requests)
			return
		}
		messages.WithLabelValues("ok").Inc()
		records.Add(float64(items))
	}
}
