// Package mq is the STOMP client every service uses to talk to the broker
// (ActiveMQ locally, Amazon MQ in production), over go-stomp v3.
//
// Publisher sends persistent messages and returns only after the broker's
// receipt, over a small pool of connections, one durable send at a time on
// each. It speaks STOMP itself with go-stomp's frame codec rather than
// through stomp.Conn: after a receipt timeout stomp.Conn (v3.1.3) keeps the
// orphaned receipt channel, and its connection goroutine then blocks forever
// on the late receipt or on the close, holding the connection's buffers. A
// publishing connection here is closed after any failed round trip, and its
// two goroutines (reader, heart-beats) end with the socket. See sendconn.go.
//
// Subscriber consumes with client-individual ack over stomp.Conn and
// reconnects and resubscribes with backoff when the broker goes away.
// go-stomp can block in Disconnect and Unsubscribe when the peer is gone, so
// every such call here runs under a timeout and the socket is closed anyway.
package mq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/go-stomp/stomp/v3"
)

// ErrUnavailable is returned when the broker cannot be reached or did not
// confirm a send in time. Callers answer 503 and must not assume the message
// was dropped or kept.
var ErrUnavailable = errors.New("broker unavailable")

// ErrUnconfirmed is wrapped, besides ErrUnavailable, when the frames were
// written but no answer came (receipt timeout, connection lost after the
// write): the broker may or may not have acted on them. Without it, an
// ErrUnavailable means the broker did not act on them (dial, handshake or
// write failed, or the broker answered ERROR).
var ErrUnconfirmed = errors.New("outcome unconfirmed")

// ErrRefused is wrapped, besides ErrUnavailable, when the broker answered
// a round trip with an ERROR frame: it refused the frames (a full store or
// memory limit after sendFailIfNoSpaceAfterTimeout, a transaction marked
// rollback-only) and kept none of them. It is a definite outcome: the
// caller answers at once, and a publisher does not send the same frames
// again (the broker would make them wait out the same timeout).
var ErrRefused = errors.New("refused by the broker")

// Config is the broker part of a service's configuration.
type Config struct {
	Addr           string        `env:"STOMP_ADDR" envDefault:"127.0.0.1:61613"`
	Login          string        `env:"STOMP_LOGIN"`
	Passcode       string        `env:"STOMP_PASSCODE" secret:"true"`
	Host           string        `env:"STOMP_HOST" envDefault:"/"`
	TLS            bool          `env:"STOMP_TLS"`
	TLSServerName  string        `env:"STOMP_TLS_SERVER_NAME"`
	Conns          int           `env:"STOMP_CONNS" envDefault:"4"`
	DialTimeout    time.Duration `env:"STOMP_DIAL_TIMEOUT" envDefault:"3s"`
	ReceiptTimeout time.Duration `env:"STOMP_RECEIPT_TIMEOUT" envDefault:"5s"`
	HeartBeat      time.Duration `env:"STOMP_HEARTBEAT" envDefault:"10s"`
	CloseTimeout   time.Duration `env:"STOMP_CLOSE_TIMEOUT" envDefault:"2s"`
}

func (c Config) withDefaults() Config {
	if c.Conns <= 0 {
		c.Conns = 1
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 3 * time.Second
	}
	if c.ReceiptTimeout <= 0 {
		c.ReceiptTimeout = 5 * time.Second
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 2 * time.Second
	}
	if c.Host == "" {
		c.Host = "/"
	}
	return c
}

// session is one STOMP connection and the socket under it, kept so that a
// hung connection can always be torn down.
type session struct {
	raw  net.Conn
	conn *stomp.Conn
}

// dialRaw opens the TCP (or TLS) connection to the broker.
func dialRaw(ctx context.Context, cfg Config) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	var raw net.Conn
	var err error
	d := &net.Dialer{}
	if cfg.TLS {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		if cfg.TLSServerName != "" {
			host = cfg.TLSServerName
		}
		td := &tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
		raw, err = td.DialContext(dctx, "tcp", cfg.Addr)
	} else {
		raw, err = d.DialContext(dctx, "tcp", cfg.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w: %w", cfg.Addr, ErrUnavailable, err)
	}
	return tuneConn(raw), nil
}

func dial(ctx context.Context, cfg Config, log *slog.Logger) (*session, error) {
	raw, err := dialRaw(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opts := []func(*stomp.Conn) error{
		stomp.ConnOpt.Host(cfg.Host),
		stomp.ConnOpt.RcvReceiptTimeout(cfg.ReceiptTimeout),
		stomp.ConnOpt.MsgSendTimeout(cfg.ReceiptTimeout),
		stomp.ConnOpt.DisconnectReceiptTimeout(cfg.CloseTimeout),
		stomp.ConnOpt.UnsubscribeReceiptTimeout(cfg.CloseTimeout),
		stomp.ConnOpt.ReadChannelCapacity(256),
		stomp.ConnOpt.WriteChannelCapacity(256),
		stomp.ConnOpt.ReadBufferSize(64 << 10),
		stomp.ConnOpt.WriteBufferSize(64 << 10),
		stomp.ConnOpt.Logger(stompLogger{log: log}),
	}
	if cfg.HeartBeat > 0 {
		// The grace go-stomp allows for a late heart-beat defaults to 5 s.
		// ActiveMQ sends its first beat two intervals after CONNECTED (one
		// apart after that), so a grace of one interval expires just as that
		// beat is due: idle subscriptions (the revocation topic) were dropped
		// 20 s after subscribing whenever the machine was busy. Allow two.
		opts = append(opts, stomp.ConnOpt.HeartBeat(cfg.HeartBeat, cfg.HeartBeat),
			stomp.ConnOpt.HeartBeatError(max(2*cfg.HeartBeat, 5*time.Second)))
	}
	if cfg.Login != "" {
		opts = append(opts, stomp.ConnOpt.Login(cfg.Login, cfg.Passcode))
	}
	// The CONNECT handshake has no deadline of its own in go-stomp.
	_ = raw.SetDeadline(time.Now().Add(cfg.DialTimeout))
	conn, err := stomp.Connect(raw, opts...)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("stomp connect %s: %w: %w", cfg.Addr, ErrUnavailable, err)
	}
	_ = raw.SetDeadline(time.Time{})
	return &session{raw: raw, conn: conn}, nil
}

// close disconnects politely within timeout and closes the socket regardless.
func (s *session) close(timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		_ = s.conn.Disconnect()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	_ = s.raw.Close()
}

// withTimeout runs f and gives up waiting after d; f keeps running in the
// background but its result is ignored.
func withTimeout(d time.Duration, f func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(d):
		return fmt.Errorf("timed out after %s", d)
	}
}
