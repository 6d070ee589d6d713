// Package publish makes accepted requests durable with group commit: the
// JSON fragments of concurrent requests are gathered into one message (one
// broker send with one receipt, or one HTTP POST to the audit logger), and
// every request waits for the outcome of the message that carries it.
//
// A message opens when a request arrives and no message is open. It is sent
// once the coalescing window has passed and a send slot (one per broker
// connection) is free; while every slot is busy it keeps gathering, so under
// load messages grow instead of queueing. A message that reaches its byte or
// item cap is closed at once and the next request opens a new one. The
// fragments of one request are never split across messages.
//
// A paired Group (NewPaired) carries a second part beside each request's
// fragment, its audit record, gathered into a second message that the
// PairSendFunc makes durable together with the first (one broker
// transaction): a request's events and its audit record are kept together or
// not at all.
package publish

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"threatview/collector"
)

// SendFunc makes one message durable. body is the complete message; items is
// the number of items (events, audit records) in it. It must return within
// the ctx deadline and must not keep body after returning.
type SendFunc func(ctx context.Context, body []byte, items int) error

// PairSendFunc makes a message and its paired message durable together, all
// or nothing. aux is the complete paired message (AuxPrefix, the requests'
// aux fragments, Suffix), nil when no request in the message brought one.
type PairSendFunc func(ctx context.Context, body []byte, items int, aux []byte, auxItems int) error

// Options configure a Group.
type Options struct {
	// Prefix and Suffix wrap the comma-joined fragments, e.g.
	// `{"v":1,"events":[` and `]}`.
	Prefix, Suffix string
	// AuxPrefix (with Suffix) wraps the paired fragments of a paired Group.
	AuxPrefix string
	// Window is how long a message stays open at least; 0 sends as soon as
	// a slot is free.
	Window time.Duration
	// MaxBytes and MaxItems cap a message (a single larger request still
	// travels alone).
	MaxBytes, MaxItems int
	// Concurrency is how many messages may be in flight at once (the
	// number of broker connections).
	Concurrency int
	// Timeout bounds one send.
	Timeout time.Duration
	// Observe, when set, is called after each send with its size and outcome.
	Observe func(requests, items, bytes int, d time.Duration, err error)
}

// Group gathers fragments into messages and sends them with SendFunc.
type Group struct {
	opt   Options
	send  SendFunc
	pair  PairSendFunc
	slots chan struct{}

	mu  sync.Mutex
	cur *message
	wg  sync.WaitGroup
}

type message struct {
	buf      []byte
	items    int
	aux      []byte // paired fragments, without AuxPrefix until sent
	auxItems int
	requests int
	full     chan struct{} // closed when the message is closed early (cap reached)
	done     chan struct{} // closed when err is set
	err      error
}

// Ticket is a request's place in a message.
type Ticket struct{ m *message }

// Wait blocks until the message carrying the request is sent and returns
// the send's error. A zero Ticket returns nil at once.
func (t Ticket) Wait() error {
	if t.m == nil {
		return nil
	}
	<-t.m.done
	return t.m.err
}

// NewPaired returns a Group whose requests may bring a paired fragment
// (AddPair), sent with send together with the message.
func NewPaired(opt Options, send PairSendFunc) *Group {
	g := New(opt, nil)
	g.pair = send
	return g
}

// New returns a Group sending with send.
func New(opt Options, send SendFunc) *Group {
	if opt.Concurrency <= 0 {
		opt.Concurrency = 1
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 512 << 10
	}
	if opt.MaxItems <= 0 {
		opt.MaxItems = 5000
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 5 * time.Second
	}
	return &Group{opt: opt, send: send, slots: make(chan struct{}, opt.Concurrency)}
}

// Add puts one request's fragment (one or more JSON values joined by
// commas) with its item count into the open message and returns its
// ticket. The fragment is copied.
func (g *Group) Add(fragment []byte, items int) Ticket {
	return g.AddPair(fragment, items, nil)
}

// AddPair is Add with a paired fragment (one JSON value, e.g. the request's
// audit record) that travels in the paired message, durable together with
// the request's fragment. aux is copied. On a Group made with New, a
// request with a paired fragment fails: nothing could keep it.
func (g *Group) AddPair(fragment []byte, items int, aux []byte) Ticket {
	if len(aux) > 0 && g.pair == nil {
		m := &message{done: make(chan struct{}), err: errors.New("publish: paired fragment on an unpaired group")}
		close(m.done)
		return Ticket{m: m}
	}
	g.mu.Lock()
	m := g.cur
	if m != nil && (len(m.buf)+len(m.aux)+2+len(fragment)+len(aux)+len(g.opt.Suffix) > g.opt.MaxBytes || m.items+items > g.opt.MaxItems) {
		g.closeLocked(m)
		m = nil
	}
	if m == nil {
		m = &message{
			buf:  make([]byte, 0, g.initialCap(len(fragment))),
			full: make(chan struct{}),
			done: make(chan struct{}),
		}
		m.buf = append(m.buf, g.opt.Prefix...)
		g.cur = m
		g.wg.Add(1)
		go g.run(m)
	} else {
		m.buf = append(m.buf, ',')
	}
	m.buf = append(m.buf, fragment...)
	m.items += items
	if len(aux) > 0 {
		if len(m.aux) > 0 {
			m.aux = append(m.aux, ',')
		}
		m.aux = append(m.aux, aux...)
		m.auxItems++
	}
	m.requests++
	if len(m.buf)+len(m.aux)+len(g.opt.Suffix) >= g.opt.MaxBytes || m.items >= g.opt.MaxItems {
		g.closeLocked(m)
	}
	g.mu.Unlock()
	return Ticket{m: m}
}

func (g *Group) initialCap(n int) int {
	c := 4 * (n + len(g.opt.Prefix) + len(g.opt.Suffix) + 1)
	if c > g.opt.MaxBytes {
		c = g.opt.MaxBytes
	}
	return c
}

// closeLocked stops m from taking more requests.
func (g *Group) closeLocked(m *message) {
	if g.cur == m {
		g.cur = nil
		close(m.full)
	}
}

func (g *Group) run(m *message) {
	defer g.wg.Done()
	// The timeout runs from the message's opening, so waiting for a slot
	// counts too: no request waits much longer than Timeout.
	ctx, cancel := context.WithTimeout(context.Background(), g.opt.Timeout)
	defer cancel()
	if g.opt.Window > 0 {
		t := time.NewTimer(g.opt.Window)
		select {
		case <-t.C:
		case <-m.full:
			t.Stop()
		}
	}
	var err error
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		err = fmt.Errorf("%w: no free connection within %s", ErrTimeout, g.opt.Timeout)
	}
	g.mu.Lock()
	g.closeLocked(m)
	body := append(m.buf, g.opt.Suffix...)
	var aux []byte
	if len(m.aux) > 0 {
		aux = make([]byte, 0, len(g.opt.AuxPrefix)+len(m.aux)+len(g.opt.Suffix))
		aux = append(append(append(aux, g.opt.AuxPrefix...), m.aux...), g.opt.Suffix...)
	}
	items, auxItems, requests := m.items, m.auxItems, m.requests
	g.mu.Unlock()

	start := time.Now()
	if err == nil {
		if g.pair != nil {
			err = g.pair(ctx, body, items, aux, auxItems)
		} else {
			err = g.send(ctx, body, items)
		}
		<-g.slots
	}
	if g.opt.Observe != nil {
		g.opt.Observe(requests, items, len(body), time.Since(start), err)
	}
	m.err = err
	close(m.done)
}

// ErrTimeout is returned to the requests of a message that found no free
// send slot before its timeout. It wraps collector.ErrUnavailable.
var ErrTimeout = fmt.Errorf("publish timed out: %w", collector.ErrUnavailable)

// Flush waits until every message added so far has been sent.
func (g *Group) Flush() { g.wg.Wait() }
