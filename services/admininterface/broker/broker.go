// Package broker is the admin interface's adapter to ActiveMQ over STOMP:
// it browses queues (depths and dead-letter messages) without consuming
// them, and replays or deletes dead-lettered messages one at a time.
//
// What the broker can tell over STOMP bounds what it shows: a browser
// subscription (`browser:true`) walks a queue without taking its messages,
// so depths are counts of browsed messages, capped; consumer counts are not
// available over STOMP on Debian's ActiveMQ (advisory messages need XStream,
// which the package lacks, and JMX and the web console are off), so the
// status page takes them from the consumers' own metrics instead.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"

	"threatview/admininterface"
	"threatview/platform/mq"
	"threatview/platform/wire"
)

// Message is one browsed message.
type Message struct {
	ID          string // the broker's message-id (JMSMessageID)
	Destination string
	Reason      string // why it was dead-lettered (wire.HeaderDeadLetterReason)
	Timestamp   time.Time
	Headers     map[string]string
	Body        []byte
}

// Broker browses and edits queues on one broker.
type Broker struct {
	cfg  mq.Config
	pub  *mq.Publisher
	log  *slog.Logger
	idle time.Duration // how long a read waits before deciding a queue has no more messages
}

// BrowseLimit is how many messages an ActiveMQ queue browser sees at most
// (the broker's maxBrowsePageSize, 400 by default, Amazon MQ's too): past
// it the broker ends the browse as if the queue ended. A browse that
// reaches it is therefore reported incomplete ("400+"), never as a depth.
const BrowseLimit = 400

// New returns a Broker; pub sends replayed messages (persistent, with receipt).
func New(cfg mq.Config, pub *mq.Publisher, log *slog.Logger) *Broker {
	return &Broker{cfg: cfg, pub: pub, log: log, idle: 2 * time.Second}
}

// dial opens one STOMP connection; errors wrap ErrUnavailable.
func (b *Broker) dial(ctx context.Context) (*stomp.Conn, net.Conn, error) {
	timeout := b.cfg.DialTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := &net.Dialer{}
	var raw net.Conn
	var err error
	if b.cfg.TLS {
		host, _, _ := net.SplitHostPort(b.cfg.Addr)
		if b.cfg.TLSServerName != "" {
			host = b.cfg.TLSServerName
		}
		td := &tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
		raw, err = td.DialContext(dctx, "tcp", b.cfg.Addr)
	} else {
		raw, err = d.DialContext(dctx, "tcp", b.cfg.Addr)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: dial broker %s: %v", admininterface.ErrUnavailable, b.cfg.Addr, err)
	}
	host := b.cfg.Host
	if host == "" {
		host = "/"
	}
	opts := []func(*stomp.Conn) error{
		stomp.ConnOpt.Host(host),
		stomp.ConnOpt.HeartBeat(0, 0),
		stomp.ConnOpt.RcvReceiptTimeout(5 * time.Second),
		stomp.ConnOpt.DisconnectReceiptTimeout(3 * time.Second),
		stomp.ConnOpt.UnsubscribeReceiptTimeout(3 * time.Second),
		stomp.ConnOpt.Logger(quiet{}),
	}
	if b.cfg.Login != "" {
		opts = append(opts, stomp.ConnOpt.Login(b.cfg.Login, b.cfg.Passcode))
	}
	_ = raw.SetDeadline(time.Now().Add(timeout))
	conn, err := stomp.Connect(raw, opts...)
	if err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("%w: stomp connect %s: %v", admininterface.ErrUnavailable, b.cfg.Addr, err)
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, raw, nil
}

// closeConn disconnects (the DISCONNECT receipt confirms every frame sent
// before it, acks included) and closes the socket.
func closeConn(conn *stomp.Conn, raw net.Conn) error {
	done := make(chan error, 1)
	go func() { done <- conn.Disconnect() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(4 * time.Second):
		err = errors.New("disconnect receipt timed out")
	}
	raw.Close()
	return err
}

// release ends a subscription we may have stopped reading mid-queue: go-stomp
// delivers every frame through one loop, so a subscription channel left full
// would block the DISCONNECT receipt (and Unsubscribe) for ever. Draining it
// until the connection closes it keeps the loop moving.
func release(conn *stomp.Conn, raw net.Conn, sub *stomp.Subscription) error {
	go func() {
		for range sub.C {
		}
	}()
	return closeConn(conn, raw)
}

// Browse returns up to max messages of queue (a /queue/ destination) without
// consuming them; complete is false when the queue holds more than max.
// withBody false leaves bodies out (for counting).
func (b *Broker) Browse(ctx context.Context, queue string, max int, withBody bool) (msgs []Message, complete bool, err error) {
	complete, err = b.walk(ctx, queue, func(m *stomp.Message) bool {
		if len(msgs) >= max {
			return false
		}
		msgs = append(msgs, toMessage(m, withBody))
		return true
	})
	return msgs, complete, err
}

// walk browses queue in order, handing each message to f until f returns
// false (complete is then false) or the queue ends (complete true).
func (b *Broker) walk(ctx context.Context, queue string, f func(*stomp.Message) bool) (complete bool, err error) {
	conn, raw, err := b.dial(ctx)
	if err != nil {
		return false, err
	}
	sub, err := conn.Subscribe(queue, stomp.AckAuto, stomp.SubscribeOpt.Header("browser", "true"))
	if err != nil {
		closeConn(conn, raw)
		return false, fmt.Errorf("%w: browse %s: %v", admininterface.ErrUnavailable, queue, err)
	}
	defer release(conn, raw, sub)
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	seen := 0
	for {
		select {
		case m, ok := <-sub.C:
			if !ok || m == nil {
				return false, fmt.Errorf("%w: browse %s: subscription closed", admininterface.ErrUnavailable, queue)
			}
			if m.Err != nil {
				return false, fmt.Errorf("%w: browse %s: %v", admininterface.ErrUnavailable, queue, m.Err)
			}
			if m.Header.Get("browser") == "end" {
				return seen < BrowseLimit, nil
			}
			seen++
			if !f(m) {
				return false, nil
			}
		case <-timeout.C:
			return false, fmt.Errorf("%w: browse %s: no end of queue after 30s", admininterface.ErrUnavailable, queue)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

func toMessage(m *stomp.Message, withBody bool) Message {
	out := Message{
		ID:          m.Header.Get(frame.MessageId),
		Destination: m.Header.Get(frame.Destination),
		Reason:      m.Header.Get(wire.HeaderDeadLetterReason),
		Headers:     make(map[string]string, m.Header.Len()),
	}
	for i := 0; i < m.Header.Len(); i++ {
		k, v := m.Header.GetAt(i)
		out.Headers[k] = v
	}
	if ms, err := parseMillis(m.Header.Get("timestamp")); err == nil {
		out.Timestamp = ms
	}
	if withBody {
		out.Body = m.Body
	}
	return out
}

func parseMillis(s string) (time.Time, error) {
	var ms int64
	if _, err := fmt.Sscan(s, &ms); err != nil || ms <= 0 {
		return time.Time{}, errors.New("no timestamp")
	}
	return time.UnixMilli(ms).UTC(), nil
}

// Get returns one message of queue by id without consuming it, looking at
// no more than max messages; ErrNotFound when it is not (or no longer) there.
func (b *Broker) Get(ctx context.Context, queue, id string, max int) (Message, error) {
	var found *Message
	seen := 0
	_, err := b.walk(ctx, queue, func(m *stomp.Message) bool {
		seen++
		if m.Header.Get(frame.MessageId) == id {
			msg := toMessage(m, true)
			found = &msg
			return false
		}
		return seen < max
	})
	if err != nil {
		return Message{}, err
	}
	if found == nil {
		return Message{}, fmt.Errorf("%w: message %s in %s", admininterface.ErrNotFound, id, queue)
	}
	return *found, nil
}

// selector matches one message by its id; ids are broker-made
// ("ID:host-...:1:1:1:1"), quotes are doubled anyway.
func selector(id string) string {
	return "JMSMessageID = '" + strings.ReplaceAll(id, "'", "''") + "'"
}

// take consumes messages of queue that match sel (a JMS selector; blank:
// any), up to max (0: until the queue has none left), handing each to f
// before acknowledging it; f failing leaves the message in the queue. It
// returns how many were handled.
func (b *Broker) take(ctx context.Context, queue, sel string, max int, f func(*stomp.Message) error) (int, error) {
	conn, raw, err := b.dial(ctx)
	if err != nil {
		return 0, err
	}
	opts := []func(*frame.Frame) error{stomp.SubscribeOpt.Header("activemq.prefetchSize", "1")}
	if sel != "" {
		opts = append(opts, stomp.SubscribeOpt.Header("selector", sel))
	}
	sub, err := conn.Subscribe(queue, stomp.AckClientIndividual, opts...)
	if err != nil {
		closeConn(conn, raw)
		return 0, fmt.Errorf("%w: subscribe %s: %v", admininterface.ErrUnavailable, queue, err)
	}
	n := 0
	var ferr error
loop:
	for max <= 0 || n < max {
		select {
		case m, ok := <-sub.C:
			if !ok || m == nil || m.Err != nil {
				ferr = fmt.Errorf("%w: read %s", admininterface.ErrUnavailable, queue)
				break loop
			}
			if err := f(m); err != nil {
				ferr = err
				break loop
			}
			if err := conn.Ack(m); err != nil {
				ferr = fmt.Errorf("%w: ack in %s: %v", admininterface.ErrUnavailable, queue, err)
				break loop
			}
			n++
		case <-time.After(b.idle):
			break loop
		case <-ctx.Done():
			ferr = ctx.Err()
			break loop
		}
	}
	// Whatever was prefetched but not handled goes back to the queue when
	// the connection ends (it was never acknowledged).
	if err := release(conn, raw, sub); err != nil && ferr == nil && n > 0 {
		ferr = fmt.Errorf("%w: confirm acks in %s: %v", admininterface.ErrUnavailable, queue, err)
	}
	return n, ferr
}

// Replay moves messages from a dead-letter queue back to target: the one
// with id, or (id blank) up to max of them. Each is sent to target
// (persistent, with receipt) before it is acknowledged on the DLQ, so a
// failure in between leaves a copy in both places, never in neither; the
// consumers store events and audit records idempotently. It returns how many
// were replayed; a missing id is ErrNotFound.
func (b *Broker) Replay(ctx context.Context, dlq, target, id string, max int) (int, error) {
	sel := ""
	if id != "" {
		sel = selector(id)
	}
	n, err := b.take(ctx, dlq, sel, max, b.resend(ctx, dlq, target, nil))
	if err == nil && id != "" && n == 0 {
		return 0, fmt.Errorf("%w: message %s in %s", admininterface.ErrNotFound, id, dlq)
	}
	return n, err
}

// ReplayAll replays every message that entered dlq before the time before,
// however many (the browse limit does not bound it): it consumes until the
// queue holds no such message. Messages that fail again and come back to
// the DLQ while it runs are newer than before and stay there, so it ends
// even on messages that can never be stored. progress, when not nil, is
// called with the count so far after each message. It returns how many
// were replayed.
func (b *Broker) ReplayAll(ctx context.Context, dlq, target string, before time.Time, progress func(int)) (int, error) {
	return b.take(ctx, dlq, fmt.Sprintf("JMSTimestamp < %d", before.UnixMilli()), 0, b.resend(ctx, dlq, target, progress))
}

// resend returns the take callback that sends a dead-lettered message to
// target, counting them for progress.
func (b *Broker) resend(ctx context.Context, dlq, target string, progress func(int)) func(*stomp.Message) error {
	n := 0
	return func(m *stomp.Message) error {
		headers := map[string]string{"threatview-replayed-from": dlq}
		if err := b.pub.Send(ctx, target, m.Body, headers); err != nil {
			return fmt.Errorf("%w: replay to %s: %v", admininterface.ErrUnavailable, target, err)
		}
		if n++; progress != nil {
			progress(n)
		}
		return nil
	}
}

// Delete removes the message with id from queue; ErrNotFound when it is
// not there.
func (b *Broker) Delete(ctx context.Context, queue, id string) error {
	n, err := b.take(ctx, queue, selector(id), 1, func(*stomp.Message) error { return nil })
	if err == nil && n == 0 {
		return fmt.Errorf("%w: message %s in %s", admininterface.ErrNotFound, id, queue)
	}
	return err
}

// Purge deletes up to max messages of queue and returns how many went.
func (b *Broker) Purge(ctx context.Context, queue string, max int) (int, error) {
	return b.take(ctx, queue, "", max, func(*stomp.Message) error { return nil })
}

// Ping checks that the broker accepts a connection (for /readyz).
func (b *Broker) Ping(ctx context.Context) error {
	conn, raw, err := b.dial(ctx)
	if err != nil {
		return err
	}
	return closeConn(conn, raw)
}

// quiet drops go-stomp's own log lines; errors reach callers as values.
type quiet struct{}

func (quiet) Debugf(string, ...any)   {}
func (quiet) Infof(string, ...any)    {}
func (quiet) Warningf(string, ...any) {}
func (quiet) Errorf(string, ...any)   {}
func (quiet) Debug(string)            {}
func (quiet) Info(string)             {}
func (quiet) Warning(string)          {}
func (quiet) Error(string)            {}
