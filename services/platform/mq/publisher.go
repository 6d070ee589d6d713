package mq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/go-stomp/stomp/v3/frame"
)

// Publisher sends persistent messages with a receipt over a pool of
// connections, each dialled lazily and closed after any failed round trip.
//
// A pooled connection the broker dropped (restart, ERROR, missed
// heart-beats) is noticed by its reader and replaced before use. A send that
// fails on a reused connection for any reason but a receipt timeout or the
// broker's ERROR answer (ErrRefused) is tried once more on a fresh one: the
// broker may have stored it, but every message the services send is
// idempotent by the ids inside it.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	slots chan *sendConn // nil entries are free slots without a connection
	seq   atomic.Uint64
}

// Sender sends one persistent message and returns after the broker's
// receipt; errors wrap ErrUnavailable. Publisher is the Sender of the
// services; tests give fakes.
type Sender interface {
	Send(ctx context.Context, dest string, body []byte, headers map[string]string) error
}

var _ Sender = (*Publisher)(nil)

// Message is one message of a transaction (see SendTx).
type Message struct {
	Dest    string
	Body    []byte
	Headers map[string]string
}

// NewPublisher returns a Publisher; it connects on first use.
func NewPublisher(cfg Config, log *slog.Logger) *Publisher {
	cfg = cfg.withDefaults()
	p := &Publisher{cfg: cfg, log: log, slots: make(chan *sendConn, cfg.Conns)}
	for i := 0; i < cfg.Conns; i++ {
		p.slots <- nil
	}
	return p
}

// Send publishes body to dest as a persistent message and returns after the
// broker's receipt. headers are added to the SEND frame. It returns an error
// wrapping ErrUnavailable when the broker cannot be reached or does not
// confirm within the receipt timeout; the message may or may not have been
// kept in that case.
func (p *Publisher) Send(ctx context.Context, dest string, body []byte, headers map[string]string) error {
	return p.do(ctx, "send to "+dest, []*frame.Frame{sendFrame(dest, body, headers, "")})
}

// SendTx publishes msgs in one STOMP transaction: the broker keeps all of
// them or none. It returns after the receipt of the COMMIT; errors wrap
// ErrUnavailable, and after a receipt timeout the transaction may or may not
// have been committed.
func (p *Publisher) SendTx(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	tx := "tx-" + strconv.FormatUint(p.seq.Add(1), 36)
	frs := make([]*frame.Frame, 0, len(msgs)+2)
	frs = append(frs, frame.New(frame.BEGIN, frame.Transaction, tx))
	for _, m := range msgs {
		frs = append(frs, sendFrame(m.Dest, m.Body, m.Headers, tx))
	}
	frs = append(frs, frame.New(frame.COMMIT, frame.Transaction, tx))
	return p.do(ctx, fmt.Sprintf("send %d messages in a transaction", len(msgs)), frs)
}

// Ping proves the broker confirms a round trip now (for /readyz): an empty
// transaction begun and aborted with a receipt. A stalled broker, or a pool
// whose every connection is stuck in a send, is not ready.
func (p *Publisher) Ping(ctx context.Context) error {
	tx := "ping-" + strconv.FormatUint(p.seq.Add(1), 36)
	return p.do(ctx, "ping", []*frame.Frame{
		frame.New(frame.BEGIN, frame.Transaction, tx),
		frame.New(frame.ABORT, frame.Transaction, tx),
	})
}

// Close disconnects every idle connection.
func (p *Publisher) Close() error {
	for i := 0; i < cap(p.slots); i++ {
		select {
		case c := <-p.slots:
			if c != nil {
				c.close()
			}
			p.slots <- nil
		default:
		}
	}
	return nil
}

func sendFrame(dest string, body []byte, headers map[string]string, tx string) *frame.Frame {
	f := frame.New(frame.SEND,
		frame.Destination, dest,
		frame.ContentType, "application/json",
		frame.ContentLength, strconv.Itoa(len(body)),
		"persistent", "true")
	if tx != "" {
		f.Header.Add(frame.Transaction, tx)
	}
	for k, v := range headers {
		f.Header.Add(k, v)
	}
	f.Body = body
	return f
}

// do runs one round trip, retried once on a fresh connection when a reused
// one failed fast.
func (p *Publisher) do(ctx context.Context, op string, frs []*frame.Frame) error {
	// An attempt whose outcome is unknown keeps the whole call's outcome
	// unknown, whatever the retry's failure says.
	var unconfirmed error
	for attempt := 0; ; attempt++ {
		c, err := p.acquire(ctx)
		if err != nil {
			if unconfirmed != nil {
				return fmt.Errorf("%s: %w (an earlier attempt: %w)", op, err, unconfirmed)
			}
			return fmt.Errorf("%s: %w", op, err)
		}
		id := "r-" + strconv.FormatUint(p.seq.Add(1), 36)
		err = c.roundTrip(ctx, id, frs, p.cfg.ReceiptTimeout)
		if err == nil {
			p.slots <- c
			return nil
		}
		c.close()
		p.slots <- nil
		// An ERROR is the broker's answer, not a stale connection's: sending
		// again would only wait out the same refusal.
		if attempt == 0 && c.reused && !errors.Is(err, errReceiptTimeout) && !errors.Is(err, ErrRefused) &&
			!errors.Is(err, errNotCommitted) && ctx.Err() == nil {
			p.log.Debug("broker connection failed; retrying on a fresh one", "op", op, "err", err)
			if errors.Is(err, ErrUnconfirmed) {
				unconfirmed = err
			}
			continue
		}
		if unconfirmed != nil && !errors.Is(err, ErrUnconfirmed) {
			return fmt.Errorf("%s: %w: %w (an earlier attempt: %w)", op, ErrUnavailable, err, unconfirmed)
		}
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
}

// acquire takes a slot and returns a live connection for it, dialling when
// the slot is empty or its connection died while idle. On error the slot is
// given back.
func (p *Publisher) acquire(ctx context.Context) (*sendConn, error) {
	var c *sendConn
	select {
	case c = <-p.slots:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for broker connection: %w: %w", ErrUnavailable, ctx.Err())
	}
	if c != nil && c.alive() {
		c.reused = true
		return c, nil
	}
	if c != nil {
		c.close()
	}
	c, err := dialSend(ctx, p.cfg, p.log)
	if err != nil {
		p.slots <- nil
		return nil, err
	}
	return c, nil
}
