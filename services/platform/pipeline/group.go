package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Batch is what one send makes durable.
type Batch struct {
	// Body is the message: Prefix, the fragments joined by commas, Suffix.
	Body []byte
	// Items is the number of items (events, audit records) in Body.
	Items int
	// Aux is the paired message (AuxPrefix, the paired fragments, Suffix),
	// nil when no request in the batch brought one (always on an unpaired
	// Group).
	Aux []byte
	// AuxItems is the number of paired fragments in Aux.
	AuxItems int
	// Requests is the number of requests gathered.
	Requests int
}

// SendFunc makes one batch durable (Body and, when not nil, Aux: all or
// nothing). It must return within the ctx deadline and must not keep the
// batch's slices after returning.
type SendFunc func(ctx context.Context, b Batch) error

// GroupOptions configure a Group.
type GroupOptions struct {
	// Prefix and Suffix wrap the comma-joined fragments, e.g.
	// `{"v":1,"records":[` and `]}`.
	Prefix, Suffix string
	// AuxPrefix (with Suffix) wraps the paired fragments of a paired Group.
	AuxPrefix string
	// Window is how long a message stays open at least; 0 sends as soon as
	// a slot is free.
	Window time.Duration
	// FullRate, when positive, scales the window with the arrival rate
	// (requests per second, measured over about a second): a message
	// opened while requests arrive at FullRate or faster stays open the
	// whole Window, one opened at a tenth of it a tenth of the Window. A
	// quiet service then answers without waiting for company that is not
	// coming, and a busy one still gathers. 0 keeps the whole Window.
	FullRate float64
	// MaxBytes (default 512 KiB) and MaxItems (default 5000) cap a message
	// (a single larger request still travels alone).
	MaxBytes, MaxItems int
	// Concurrency is how many messages may be in flight at once (the
	// number of broker connections); default 1.
	Concurrency int
	// Timeout bounds a message from its opening to its send's end, waiting
	// for a slot included; default 5 s.
	Timeout time.Duration
	// Unavailable, when set, is wrapped by the errors the Group makes
	// itself (no free slot in time, closed), so that callers map them like
	// a failed send (e.g. to 503).
	Unavailable error
	// Observe, when set, is called after each message with its size and
	// outcome (d is the send's duration).
	Observe func(requests, items, bytes int, d time.Duration, err error)
}

// Group is group commit: the JSON fragments of concurrent requests are gathered into
// one message (one broker send with one receipt, one broker transaction, or
// one HTTP POST), and every request waits for the outcome of the message
// that carries it. Each persistent message costs the broker about 0.5 ms of
// CPU, so one message per request would cap the whole stack.
//
// A message opens when a request arrives and no message is open. It is sent
// once the coalescing window has passed and a send slot (one per broker
// connection) is free (with FullRate set, the window is scaled to the
// arrival rate when the message opens); while every slot is busy it keeps
// gathering, so under load messages grow instead of queueing. A message that reaches its byte or
// item cap is closed at once and the next request opens a new one. The
// fragments of one request are never split across messages.
//
// A paired Group (NewPairedGroup) carries a second part beside each request's
// fragment (the collector's audit record), gathered into a second message
// that the SendFunc makes durable together with the first (one broker
// transaction): a request's two parts are kept together or not at all.
//
// It is used by the collector (events, paired with their audit records) and
// the audit logger (audit records).
type Group struct {
	opt    GroupOptions
	send   SendFunc
	paired bool
	slots  chan struct{}

	mu     sync.Mutex
	cur    *message
	closed bool
	rate   rateMeter
	wg     sync.WaitGroup
}

type message struct {
	buf      []byte
	items    int
	aux      []byte // paired fragments, without AuxPrefix until sent
	auxItems int
	requests int
	window   time.Duration // how long it stays open (GroupOptions.Window, scaled by FullRate)
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

// WaitContext is Wait that gives up when ctx ends first and returns
// ctx.Err(); the request may then still be made durable.
func (t Ticket) WaitContext(ctx context.Context) error {
	if t.m == nil {
		return nil
	}
	select {
	case <-t.m.done:
		return t.m.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrTimeout is returned to the requests of a message that found no free
// send slot before its timeout (wrapped with GroupOptions.Unavailable).
var ErrTimeout = errors.New("publish timed out")

// ErrClosed is returned to requests added after Close.
var ErrClosed = errors.New("publisher closed")

// NewGroup returns a Group sending with send. Its requests bring one
// fragment each (Add).
func NewGroup(opt GroupOptions, send SendFunc) *Group {
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

// NewPairedGroup returns a Group whose requests may bring a paired fragment
// (AddPair); send must make Batch.Aux durable together with Batch.Body.
func NewPairedGroup(opt GroupOptions, send SendFunc) *Group {
	g := NewGroup(opt, send)
	g.paired = true
	return g
}

// Add puts one request's fragment (one or more JSON values joined by
// commas) with its item count into the open message and returns its
// ticket. The fragment is copied.
func (g *Group) Add(fragment []byte, items int) Ticket {
	return g.AddPair(fragment, items, nil)
}

// AddPair is Add with a paired fragment (one JSON value, e.g. the request's
// audit record) that travels in the paired message, durable together with
// the request's fragment. aux is copied. On a Group made with NewGroup, a
// request with a paired fragment fails: nothing could keep it.
func (g *Group) AddPair(fragment []byte, items int, aux []byte) Ticket {
	if len(aux) > 0 && !g.paired {
		return failed(errors.New("publish: paired fragment on an unpaired group"))
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return failed(g.wrap(ErrClosed))
	}
	rate := g.rate.observe(time.Now())
	m := g.cur
	if m != nil && (len(m.buf)+len(m.aux)+2+len(fragment)+len(aux)+len(g.opt.Suffix) > g.opt.MaxBytes || m.items+items > g.opt.MaxItems) {
		g.closeLocked(m)
		m = nil
	}
	if m == nil {
		m = &message{
			buf:    make([]byte, 0, g.initialCap(len(fragment))),
			window: g.window(rate),
			full:   make(chan struct{}),
			done:   make(chan struct{}),
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

func failed(err error) Ticket {
	m := &message{done: make(chan struct{}), err: err}
	close(m.done)
	return Ticket{m: m}
}

func (g *Group) wrap(err error) error {
	if g.opt.Unavailable == nil {
		return err
	}
	return fmt.Errorf("%w: %w", err, g.opt.Unavailable)
}

// window is how long a message opened at the arrival rate rate (requests
// per second) stays open.
func (g *Group) window(rate float64) time.Duration {
	if g.opt.FullRate <= 0 || rate >= g.opt.FullRate {
		return g.opt.Window
	}
	return time.Duration(float64(g.opt.Window) * rate / g.opt.FullRate)
}

// rateMeter estimates an arrival rate in events per second: an
// exponentially weighted count with a time constant of rateTau, so that
// its expected value at a steady rate r is r, and a second of silence
// takes it down to about a third. The zero value reads 0 before the first
// event.
type rateMeter struct {
	rate float64
	last time.Time
}

const rateTau = time.Second

// observe counts one event at now and returns the rate including it.
func (r *rateMeter) observe(now time.Time) float64 {
	if !r.last.IsZero() {
		r.rate *= math.Exp(-float64(now.Sub(r.last)) / float64(rateTau))
	}
	r.last = now
	r.rate += float64(time.Second) / float64(rateTau)
	return r.rate
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
	if m.window > 0 {
		t := time.NewTimer(m.window)
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
		err = g.wrap(fmt.Errorf("%w: no free connection within %s", ErrTimeout, g.opt.Timeout))
	}
	g.mu.Lock()
	g.closeLocked(m)
	b := Batch{Body: append(m.buf, g.opt.Suffix...), Items: m.items, AuxItems: m.auxItems, Requests: m.requests}
	if len(m.aux) > 0 {
		b.Aux = make([]byte, 0, len(g.opt.AuxPrefix)+len(m.aux)+len(g.opt.Suffix))
		b.Aux = append(append(append(b.Aux, g.opt.AuxPrefix...), m.aux...), g.opt.Suffix...)
	}
	g.mu.Unlock()

	start := time.Now()
	if err == nil {
		err = g.send(ctx, b)
		<-g.slots
	}
	if g.opt.Observe != nil {
		g.opt.Observe(b.Requests, b.Items, len(b.Body), time.Since(start), err)
	}
	m.err = err
	close(m.done)
}

// Flush waits until every message added so far has been sent.
func (g *Group) Flush() { g.wg.Wait() }

// Close stops taking requests (later ones fail with ErrClosed), sends the
// open message and waits for every send.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	if g.cur != nil {
		g.closeLocked(g.cur)
	}
	g.mu.Unlock()
	g.wg.Wait()
}
