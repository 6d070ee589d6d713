package mq

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"
)

// Publisher sends persistent messages with a receipt over a pool of
// connections, each dialled lazily and dropped after any error.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	slots chan *session // nil entries are free slots without a connection
}

// NewPublisher returns a Publisher; it connects on first use.
func NewPublisher(cfg Config, log *slog.Logger) *Publisher {
	cfg = cfg.withDefaults()
	p := &Publisher{cfg: cfg, log: log, slots: make(chan *session, cfg.Conns)}
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
	s, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	opts := make([]func(*frame.Frame) error, 0, len(headers)+2)
	opts = append(opts, stomp.SendOpt.Receipt, stomp.SendOpt.Header("persistent", "true"))
	for k, v := range headers {
		opts = append(opts, stomp.SendOpt.Header(k, v))
	}
	if err := s.conn.Send(dest, "application/json", body, opts...); err != nil {
		p.discard(s)
		return fmt.Errorf("send to %s: %w: %w", dest, ErrUnavailable, err)
	}
	p.slots <- s
	return nil
}

// Ping makes sure one connection to the broker is up (for /readyz).
func (p *Publisher) Ping(ctx context.Context) error {
	s, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	p.slots <- s
	return nil
}

// Close disconnects every idle connection.
func (p *Publisher) Close() error {
	for i := 0; i < cap(p.slots); i++ {
		select {
		case s := <-p.slots:
			if s != nil {
				s.close(p.cfg.CloseTimeout)
			}
		default:
		}
	}
	return nil
}

func (p *Publisher) acquire(ctx context.Context) (*session, error) {
	var s *session
	select {
	case s = <-p.slots:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for broker connection: %w: %w", ErrUnavailable, ctx.Err())
	}
	if s != nil {
		return s, nil
	}
	s, err := dial(ctx, p.cfg, p.log)
	if err != nil {
		p.slots <- nil
		return nil, err
	}
	return s, nil
}

func (p *Publisher) discard(s *session) {
	go s.close(p.cfg.CloseTimeout)
	p.slots <- nil
}
