package mq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

// errReceiptTimeout means the broker did not confirm in time: the frames may
// or may not have been acted on, so the round trip is not retried. It wraps
// ErrUnconfirmed.
var errReceiptTimeout = fmt.Errorf("no receipt in time: %w", ErrUnconfirmed)

// sendConn is one publishing connection. It is used by one sender at a time
// (the pool hands it out); its reader goroutine passes the broker's frames to
// that sender and its heart-beat goroutine keeps it alive while idle.
//
// Every goroutine of a sendConn ends when the socket closes: the reader's
// only blocking points are the socket read and a send that also selects on
// closing, and the heart-beat loop selects on closing and dead. A failed
// round trip always closes the connection, so nothing is ever left waiting
// for a receipt that comes late or never.
type sendConn struct {
	raw net.Conn

	wmu   sync.Mutex // serialises writes (sender and heart-beats)
	w     *frame.Writer
	lastW time.Time
	// A round trip's frames are encoded into out (through enc) and written
	// with one system call: the broker then reads a transaction at once
	// instead of waking once per frame.
	out bytes.Buffer
	enc *frame.Writer

	frames    chan *frame.Frame // RECEIPT and ERROR frames, read by the sender
	dead      chan struct{}     // closed when the reader stops
	err       error             // why the reader stopped; read after dead
	closing   chan struct{}
	closeOnce sync.Once

	// reused is set when the pool hands out a connection that already
	// served a round trip (a failure on it may be the broker's restart).
	reused bool
}

// dialSend connects and negotiates STOMP 1.2 (or 1.1) with heart-beats.
func dialSend(ctx context.Context, cfg Config, log *slog.Logger) (*sendConn, error) {
	raw, err := dialRaw(ctx, cfg)
	if err != nil {
		return nil, err
	}
	hb := cfg.HeartBeat.Milliseconds()
	connect := frame.New(frame.CONNECT,
		frame.AcceptVersion, "1.2,1.1",
		frame.Host, cfg.Host,
		frame.HeartBeat, strconv.FormatInt(hb, 10)+","+strconv.FormatInt(hb, 10))
	if cfg.Login != "" {
		connect.Header.Add(frame.Login, cfg.Login)
		connect.Header.Add(frame.Passcode, cfg.Passcode)
	}
	c := &sendConn{
		raw:     raw,
		w:       frame.NewWriterSize(raw, 64<<10),
		frames:  make(chan *frame.Frame, 16),
		dead:    make(chan struct{}),
		closing: make(chan struct{}),
	}
	c.enc = frame.NewWriter(&c.out)
	r := frame.NewReaderSize(raw, 16<<10)
	// The handshake has the dial timeout as its deadline.
	_ = raw.SetDeadline(time.Now().Add(cfg.DialTimeout))
	connected, err := handshake(c.w, r, connect)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("stomp connect %s: %w: %w", cfg.Addr, ErrUnavailable, err)
	}
	_ = raw.SetDeadline(time.Time{})
	c.lastW = time.Now()

	// Heart-beats as STOMP 1.2 §Heart-beating: each side sends at the
	// larger of what it offers and what the other asks, if both are non-zero.
	sx, sy, err := frame.ParseHeartBeat(connected.Header.Get(frame.HeartBeat))
	if err != nil {
		sx, sy = 0, 0
	}
	var sendEvery, recvEvery time.Duration
	if cfg.HeartBeat > 0 && sy > 0 {
		sendEvery = max(cfg.HeartBeat, sy)
	}
	if cfg.HeartBeat > 0 && sx > 0 {
		recvEvery = max(cfg.HeartBeat, sx)
	}
	// ActiveMQ's first beat comes two intervals after CONNECTED, and a
	// loaded 2-core machine overshoots a tight grace: allow two intervals,
	// and at least 5 s, past the expected beat.
	var readTimeout time.Duration
	if recvEvery > 0 {
		readTimeout = recvEvery + max(2*recvEvery, 5*time.Second)
	}
	go c.readLoop(r, readTimeout)
	if sendEvery > 0 {
		go c.beatLoop(sendEvery)
	}
	log.Debug("broker connection opened", "addr", cfg.Addr, "send_heartbeat", sendEvery, "recv_heartbeat", recvEvery)
	return c, nil
}

func handshake(w *frame.Writer, r *frame.Reader, connect *frame.Frame) (*frame.Frame, error) {
	if err := w.Write(connect); err != nil {
		return nil, err
	}
	for {
		f, err := r.Read()
		if err != nil {
			return nil, err
		}
		if f == nil {
			continue // heart-beat
		}
		switch f.Command {
		case frame.CONNECTED:
			return f, nil
		case frame.ERROR:
			return nil, fmt.Errorf("broker refused the connection: %s", f.Header.Get(frame.Message))
		default:
			return nil, fmt.Errorf("unexpected %s frame before CONNECTED", f.Command)
		}
	}
}

func (c *sendConn) readLoop(r *frame.Reader, timeout time.Duration) {
	defer close(c.dead)
	for {
		if timeout > 0 {
			_ = c.raw.SetReadDeadline(time.Now().Add(timeout))
		}
		f, err := r.Read()
		if err != nil {
			c.err = err
			_ = c.raw.Close()
			return
		}
		if f == nil {
			continue // heart-beat
		}
		select {
		case c.frames <- f:
		case <-c.closing:
			return
		}
	}
}

func (c *sendConn) beatLoop(every time.Duration) {
	// Beat at half the interval so a late tick never misses the broker's
	// window.
	half := every / 2
	t := time.NewTicker(half)
	defer t.Stop()
	for {
		select {
		case <-c.closing:
			return
		case <-c.dead:
			return
		case <-t.C:
			c.wmu.Lock()
			if time.Since(c.lastW) >= half {
				_ = c.raw.SetWriteDeadline(time.Now().Add(every))
				if err := c.w.Write(nil); err != nil {
					_ = c.raw.Close()
				}
				c.lastW = time.Now()
			}
			c.wmu.Unlock()
		}
	}
}

// alive reports whether the reader still runs (no EOF, reset, missed
// heart-beats or ERROR so far).
func (c *sendConn) alive() bool {
	select {
	case <-c.dead:
		return false
	case <-c.closing:
		return false
	default:
		return true
	}
}

// errNotCommitted means a transaction's messages were not all confirmed in
// time, or the connection was lost before its COMMIT was sent: the broker
// kept none of them (closing the connection rolls the transaction back). It
// is a definite outcome, and not sent again (the broker is slow).
var errNotCommitted = errors.New("the transaction's messages were not confirmed in time; not committed")

// roundTrip writes frs and waits, until timeout or ctx ends, for the
// broker's receipts. Any error leaves the connection unusable; the caller
// closes it.
//
// Every SEND asks for a receipt. A transaction (frs ending in COMMIT) goes in
// two steps: BEGIN and the SENDs, then, once every SEND is confirmed, the
// COMMIT. A SEND the broker refuses (store or memory full, after
// sendFailIfNoSpaceAfterTimeout) is answered with an ERROR at once, and no
// COMMIT follows it: written together with the SENDs, a COMMIT the broker
// reads after a refused SEND commits the transaction's other messages, so a
// request answered as refused would be kept. Without the SENDs' receipts the
// refusal came only at the COMMIT, each SEND having waited out the timeout.
func (c *sendConn) roundTrip(ctx context.Context, id string, frs []*frame.Frame, timeout time.Duration) error {
	// Frames left from an earlier round trip (none expected) must not be
	// taken for this one's answer.
	for len(c.frames) > 0 {
		<-c.frames
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	first := frs
	var commit *frame.Frame
	if n := len(frs); n > 1 && frs[n-1].Command == frame.COMMIT {
		first, commit = frs[:n-1], frs[n-1]
	}
	want := map[string]bool{}
	for i, f := range first {
		if f.Command == frame.SEND || (commit == nil && i == len(first)-1) {
			r := id + "." + strconv.Itoa(i)
			f.Header.Set(frame.Receipt, r)
			want[r] = true
		}
	}
	if err := c.exchange(ctx, first, want, deadline, timeout, commit == nil); err != nil || commit == nil {
		return err
	}
	commit.Header.Set(frame.Receipt, id)
	return c.exchange(ctx, []*frame.Frame{commit}, map[string]bool{id: true}, deadline, timeout, true)
}

// exchange writes frs in one write and waits until every receipt in want
// has come. When a lost connection or the deadline leaves the outcome
// unknown (final: the frames could have been acted on) the error wraps
// ErrUnconfirmed; otherwise (a transaction's SENDs before its COMMIT) it
// wraps errNotCommitted.
func (c *sendConn) exchange(ctx context.Context, frs []*frame.Frame, want map[string]bool, deadline time.Time, timeout time.Duration, final bool) error {
	c.wmu.Lock()
	_ = c.raw.SetWriteDeadline(deadline)
	c.out.Reset()
	var err error
	for _, f := range frs {
		if err = c.enc.Write(f); err != nil {
			break
		}
	}
	if err == nil {
		_, err = c.raw.Write(c.out.Bytes())
	}
	if c.out.Cap() > 1<<20 {
		c.out = bytes.Buffer{} // do not keep a large message's buffer
		c.enc = frame.NewWriter(&c.out)
	}
	c.lastW = time.Now()
	c.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	// unknown is the error for an answer that did not come: the outcome is
	// unknown for the final frames, and nothing for the SENDs of a
	// transaction whose COMMIT was not sent.
	unknown := func(why string, cause error) error {
		if final {
			return fmt.Errorf("%s: %w: %w", why, ErrUnconfirmed, cause)
		}
		return fmt.Errorf("%s: %w: %w", why, errNotCommitted, cause)
	}
	for len(want) > 0 {
		select {
		case f := <-c.frames:
			switch f.Command {
			case frame.RECEIPT:
				delete(want, f.Header.Get(frame.ReceiptId))
			case frame.ERROR:
				return fmt.Errorf("%w: %s", ErrRefused, f.Header.Get(frame.Message))
			}
		case <-c.dead:
			return unknown("connection lost after the write", c.err)
		case <-timer.C:
			if final {
				return fmt.Errorf("%w (%s)", errReceiptTimeout, timeout)
			}
			return unknown("no receipt in time", fmt.Errorf("after %s", timeout))
		case <-ctx.Done():
			if final {
				return fmt.Errorf("%w: %w", errReceiptTimeout, ctx.Err())
			}
			return unknown("no receipt in time", ctx.Err())
		}
	}
	return nil
}

// close says DISCONNECT without waiting for an answer and closes the
// socket, which ends the reader and heart-beat goroutines.
func (c *sendConn) close() {
	c.closeOnce.Do(func() {
		polite := c.alive()
		close(c.closing)
		if polite && c.wmu.TryLock() {
			_ = c.raw.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_ = c.w.Write(frame.New(frame.DISCONNECT))
			c.wmu.Unlock()
		}
		_ = c.raw.Close()
	})
}
