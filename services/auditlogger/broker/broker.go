// Package broker publishes audit records to the audit queue with group
// commit: the records of concurrent posts travel in one persistent message,
// and each post returns once the message carrying it has the broker's
// receipt.
//
// Each persistent message costs the broker about 0.5 ms of CPU, so one
// message per post would cap the whole stack. A batcher goroutine takes the
// first waiting post, lets others join it for a short window, and hands the
// message to one of a few concurrent senders; posts that arrive while every
// sender is busy join the next message, so under load messages grow instead
// of queueing up.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/auditlogger"
	"threatview/platform/wire"
)

// Sender sends one persistent message and returns after the broker's
// receipt (mq.Publisher). Errors wrap mq.ErrUnavailable.
type Sender interface {
	Send(ctx context.Context, dest string, body []byte, headers map[string]string) error
}

// Options tune a GroupPublisher.
type Options struct {
	Window          time.Duration // how long a message waits for more posts
	MaxMessageBytes int           // a message stops growing past this size
	Concurrency     int           // messages in flight at once
	SendTimeout     time.Duration // give up on one send after this long
}

// GroupPublisher implements auditlogger.Publisher with group commit.
type GroupPublisher struct {
	sender  Sender
	dest    string
	opts    Options
	log     *slog.Logger
	reqs    chan *pending
	slots   chan struct{}
	stop    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
	metrics metrics
}

type pending struct {
	frag []byte // the post's records as JSON objects joined by commas
	n    int
	done chan error
}

type metrics struct {
	messages *prometheus.CounterVec
	records  prometheus.Counter
	perMsg   prometheus.Histogram
	sendDur  prometheus.Histogram
}

var _ auditlogger.Publisher = (*GroupPublisher)(nil)

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("publisher closed")

// NewGroupPublisher starts the batcher; Close stops it.
func NewGroupPublisher(sender Sender, dest string, opts Options, reg prometheus.Registerer, log *slog.Logger) *GroupPublisher {
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 1 << 20
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 10 * time.Second
	}
	p := &GroupPublisher{
		sender: sender, dest: dest, opts: opts, log: log,
		reqs:  make(chan *pending, 4096),
		slots: make(chan struct{}, opts.Concurrency),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		metrics: metrics{
			messages: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "auditlogger_broker_messages_total",
				Help: "Broker messages sent, by result (ok, error).",
			}, []string{"result"}),
			records: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "auditlogger_records_published_total",
				Help: "Audit records made durable on the broker.",
			}),
			perMsg: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "auditlogger_posts_per_message",
				Help:    "POSTs coalesced into one broker message.",
				Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
			}),
			sendDur: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "auditlogger_broker_send_seconds",
				Help:    "Time from send to broker receipt.",
				Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 5},
			}),
		},
	}
	if reg != nil {
		reg.MustRegister(p.metrics.messages, p.metrics.records, p.metrics.perMsg, p.metrics.sendDur)
	}
	go p.loop()
	return p
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
	pd := &pending{frag: frag, n: len(records), done: make(chan error, 1)}
	select {
	case p.reqs <- pd:
	case <-p.stop:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("publish audit records: %w: %w", auditlogger.ErrUnavailable, ctx.Err())
	}
	select {
	case err := <-pd.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("publish audit records: %w: %w", auditlogger.ErrUnavailable, ctx.Err())
	}
}

// Close stops taking posts, sends what is queued and waits for the sends.
func (p *GroupPublisher) Close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.done
	p.wg.Wait()
}

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

func (p *GroupPublisher) loop() {
	defer close(p.done)
	var carry *pending
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-p.reqs:
			case <-p.stop:
				p.drain()
				return
			}
		}
		batch := []*pending{first}
		size := len(first.frag)
		full := false
		add := func(pd *pending) {
			if size+len(pd.frag)+1 > p.opts.MaxMessageBytes {
				carry, full = pd, true
				return
			}
			batch = append(batch, pd)
			size += len(pd.frag) + 1
		}
		if p.opts.Window > 0 {
			timer := time.NewTimer(p.opts.Window)
		window:
			for !full {
				select {
				case pd := <-p.reqs:
					add(pd)
				case <-timer.C:
					break window
				case <-p.stop:
					break window
				}
			}
			timer.Stop()
		}
		// Wait for a free sender; posts arriving meanwhile join this message.
		if full {
			p.slots <- struct{}{}
		} else {
		slot:
			for {
				select {
				case p.slots <- struct{}{}:
					break slot
				case pd := <-p.reqs:
					add(pd)
					if full {
						p.slots <- struct{}{}
						break slot
					}
				}
			}
		}
	more:
		for !full {
			select {
			case pd := <-p.reqs:
				add(pd)
			default:
				break more
			}
		}
		p.send(batch)
	}
}

// drain sends everything still queued after Close.
func (p *GroupPublisher) drain() {
	for {
		select {
		case pd := <-p.reqs:
			p.slots <- struct{}{}
			p.send([]*pending{pd})
		default:
			return
		}
	}
}

// send publishes batch on a sender slot already taken and releases it.
func (p *GroupPublisher) send(batch []*pending) {
	size := len(`{"v":1,"records":[]}`)
	n := 0
	for _, pd := range batch {
		size += len(pd.frag) + 1
		n += pd.n
	}
	body := make([]byte, 0, size)
	body = append(body, `{"v":`...)
	body = strconv.AppendInt(body, wire.Version, 10)
	body = append(body, `,"records":[`...)
	for i, pd := range batch {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, pd.frag...)
	}
	body = append(body, "]}"...)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.SendTimeout)
		defer cancel()
		start := time.Now()
		err := p.sender.Send(ctx, p.dest, body, nil)
		p.metrics.sendDur.Observe(time.Since(start).Seconds())
		p.metrics.perMsg.Observe(float64(len(batch)))
		if err != nil {
			p.metrics.messages.WithLabelValues("error").Inc()
			p.log.Warn("audit message not confirmed by the broker", "err", err, "records", n, "posts", len(batch))
			err = fmt.Errorf("publish %d audit records: %w: %w", n, auditlogger.ErrUnavailable, err)
		} else {
			p.metrics.messages.WithLabelValues("ok").Inc()
			p.metrics.records.Add(float64(n))
		}
		for _, pd := range batch {
			pd.done <- err
		}
	}()
}
