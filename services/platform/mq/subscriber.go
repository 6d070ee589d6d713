package mq

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-stomp/stomp/v3"
)

// Delivery is one message received by a Subscriber. Ack it after its effect
// is durable; a delivery never acked comes back after a reconnect.
type Delivery struct {
	Body []byte
	msg  *stomp.Message
	conn *stomp.Conn
}

// Header returns a header of the message, or "".
func (d *Delivery) Header(name string) string {
	if d.msg == nil || d.msg.Header == nil {
		return ""
	}
	return d.msg.Header.Get(name)
}

// Redelivered reports whether the broker has delivered this message before.
func (d *Delivery) Redelivered() bool { return d.Header("redelivered") == "true" }

// Ack acknowledges this message, and every earlier one its connection
// delivered (the subscription acks cumulatively), on the connection that
// delivered it. It fails when that connection is gone, and the broker then
// redelivers.
func (d *Delivery) Ack() error {
	if d.conn == nil {
		return fmt.Errorf("ack: %w: no connection", ErrUnavailable)
	}
	if err := d.conn.Ack(d.msg); err != nil {
		return fmt.Errorf("ack: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// AckThrough acknowledges every delivery of ds with one ACK frame per
// connection: the subscription acks cumulatively (STOMP ack mode client), so
// acking the last delivery of a connection acknowledges every delivery that
// connection made before it. The caller must therefore have handled (or
// acked) every earlier delivery of those connections; ds in delivery order.
// It returns how many of ds are acknowledged: a delivery whose connection is
// gone comes back after the reconnect.
func AckThrough(ds []*Delivery) (acked int) {
	done := make(map[*stomp.Conn]bool, 1)
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if _, seen := done[d.conn]; seen {
			continue
		}
		done[d.conn] = d.Ack() == nil
	}
	for _, d := range ds {
		if done[d.conn] {
			acked++
		}
	}
	return acked
}

// Subscriber consumes one queue and keeps consuming across broker restarts.
// Its acks are cumulative (ack mode client): Ack on a delivery also
// acknowledges the deliveries its connection made before it, so deliveries
// are acked in order (AckThrough acks a batch with one frame).
type Subscriber struct {
	cfg       Config
	dest      string
	prefetch  int
	log       *slog.Logger
	out       chan *Delivery
	connected atomic.Bool
	done      chan struct{}
}

// Subscribe starts consuming dest with at most prefetch unacknowledged
// messages in flight (ActiveMQ's activemq.prefetchSize). Deliveries arrive on
// C until ctx is cancelled; then C is closed.
func Subscribe(ctx context.Context, cfg Config, dest string, prefetch int, log *slog.Logger) *Subscriber {
	if prefetch <= 0 {
		prefetch = 1
	}
	s := &Subscriber{
		cfg:      cfg.withDefaults(),
		dest:     dest,
		prefetch: prefetch,
		log:      log,
		out:      make(chan *Delivery, prefetch),
		done:     make(chan struct{}),
	}
	go s.loop(ctx)
	return s
}

// C is the channel of deliveries.
func (s *Subscriber) C() <-chan *Delivery { return s.out }

// Done is closed once the subscriber has disconnected after ctx ended.
func (s *Subscriber) Done() <-chan struct{} { return s.done }

// Ready reports whether the subscription is currently connected (for /readyz).
func (s *Subscriber) Ready(context.Context) error {
	if !s.connected.Load() {
		return fmt.Errorf("subscription to %s: %w", s.dest, ErrUnavailable)
	}
	return nil
}

func (s *Subscriber) loop(ctx context.Context) {
	defer close(s.done)
	defer close(s.out)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.consume(ctx)
		s.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("subscription lost, reconnecting", "destination", s.dest, "err", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
		if err == nil {
			backoff = 100 * time.Millisecond
		}
	}
}

// consume runs one connection's life: subscribe, pump deliveries, and tear
// down with timeouts. A nil error means the session had delivered messages
// before it ended, so the next reconnect starts with a short backoff.
func (s *Subscriber) consume(ctx context.Context) error {
	sess, err := dial(ctx, s.cfg, s.log)
	if err != nil {
		return err
	}
	defer sess.close(s.cfg.CloseTimeout)
	sub, err := sess.conn.Subscribe(s.dest, stomp.AckClient,
		stomp.SubscribeOpt.Header("activemq.prefetchSize", strconv.Itoa(s.prefetch)))
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", s.dest, err)
	}
	s.connected.Store(true)
	s.log.Info("subscribed", "destination", s.dest, "prefetch", s.prefetch)
	for {
		select {
		case <-ctx.Done():
			_ = withTimeout(s.cfg.CloseTimeout, func() error { return sub.Unsubscribe() })
			return nil
		case msg, ok := <-sub.C:
			if !ok {
				return fmt.Errorf("subscription %s closed", s.dest)
			}
			if msg.Err != nil {
				return fmt.Errorf("subscription %s: %w", s.dest, msg.Err)
			}
			d := &Delivery{Body: msg.Body, msg: msg, conn: sess.conn}
			select {
			case s.out <- d:
			case <-ctx.Done():
				_ = withTimeout(s.cfg.CloseTimeout, func() error { return sub.Unsubscribe() })
				return nil
			}
		}
	}
}
