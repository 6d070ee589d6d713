package threatview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// item is one queued event: its JSON object without sent_at.
type item struct {
	raw []byte
	id  string
	// stamp adds sent_at at each attempt (events built by Send, whose
	// occurred_at comes from this clock). SendRaw's events are relayed
	// as they are.
	stamp bool
}

// size is what the item adds to a batch body.
func (it item) size() int {
	n := len(it.raw) + 1
	if it.stamp {
		n += sentAtRoom
	}
	return n
}

// batch is a sealed or open set of events sent in one request.
type batch struct {
	seq     uint64
	items   []item // with a spool: nil until a sender reads the batch's file
	n       int    // events
	size    int    // body bytes before gzip, envelope included
	created time.Time
	file    string // spool file, "" in memory
	bytes   int64  // spool file size
	last    answer // the last failed attempt
}

// envelope is len(`{"events":[`) + len(`]}`).
const envelope = 13

// Client sends events to the collector. Create it with New and Close it.
type Client struct {
	cfg   Config
	spool *spool

	mu         sync.Mutex
	cur        *batch   // open batch
	ready      []*batch // sealed, waiting to be sent
	unresolved map[uint64]bool
	seq        uint64
	pending    int64 // events queued, not delivered or dropped
	closed     bool
	notify     chan struct{} // closed and replaced on every change

	stopCtx context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup

	queued, delivered, dropped, requests, retries, throttled atomic.Uint64
	lastErr                                                  atomic.Value // string
}

// New starts a client. With Config.SpoolDir, batches a previous client
// left in that directory are queued first.
func New(cfg Config) (*Client, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, notify: make(chan struct{}), unresolved: map[uint64]bool{}}
	if cfg.SpoolDir != "" {
		sp, recovered, err := openSpool(cfg.SpoolDir)
		if err != nil {
			return nil, err
		}
		c.spool = sp
		for _, b := range recovered {
			c.ready = append(c.ready, b)
			c.unresolved[b.seq] = true
			c.pending += int64(b.n)
			if b.seq >= c.seq {
				c.seq = b.seq + 1
			}
		}
	}
	c.stopCtx, c.stop = context.WithCancel(context.Background())
	for range cfg.Concurrency {
		c.wg.Add(1)
		go c.sender()
	}
	c.wg.Add(1)
	go c.ticker()
	return c, nil
}

// Send queues ev, setting its EventID (a UUIDv7) when empty and its App
// from Config.App when it has no app id. It blocks while the queue is full,
// until ctx ends. It returns ErrInvalidEvent, ErrEventTooLarge, ErrClosed,
// ctx's error, or an error writing the spool.
func (c *Client) Send(ctx context.Context, ev Event) error {
	it, err := c.prepare(&ev)
	if err != nil {
		return err
	}
	return c.enqueue(ctx, it, true)
}

// TrySend is Send that never blocks: it returns ErrQueueFull when the queue
// has no room.
func (c *Client) TrySend(ev Event) error {
	it, err := c.prepare(&ev)
	if err != nil {
		return err
	}
	return c.enqueue(context.Background(), it, false)
}

// SendRaw queues one event given as a JSON object (a line of NDJSON, say),
// adding an event_id when it has none. It is relayed as it is otherwise:
// no sent_at is added, and the collector validates the rest. It blocks
// like Send.
func (c *Client) SendRaw(ctx context.Context, raw []byte) error {
	if !utf8.Valid(raw) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidEvent)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fmt.Errorf("%w: not a JSON object", ErrInvalidEvent)
	}
	var id string
	if v, ok := m["event_id"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &id); err != nil {
			return fmt.Errorf("%w: event_id is not a string", ErrInvalidEvent)
		}
	}
	if id == "" {
		id = newID()
		m["event_id"], _ = json.Marshal(id)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	it := item{raw: out, id: id}
	if it.size() > MaxEventBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrEventTooLarge, len(out), MaxEventBytes)
	}
	return c.enqueue(ctx, it, true)
}

func (c *Client) prepare(ev *Event) (item, error) {
	if ev.App.ID == "" {
		ev.App = c.cfg.App
	}
	switch {
	case ev.Type == "":
		return item{}, fmt.Errorf("%w: type is required", ErrInvalidEvent)
	case ev.App.ID == "":
		return item{}, fmt.Errorf("%w: app.id is required", ErrInvalidEvent)
	}
	if ev.EventID == "" {
		ev.EventID = newID()
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return item{}, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	it := item{raw: raw, id: ev.EventID, stamp: true}
	if it.size() > MaxEventBytes {
		return item{}, fmt.Errorf("%w: %d bytes, at most %d", ErrEventTooLarge, len(raw)+sentAtRoom, MaxEventBytes)
	}
	return it, nil
}

// NewEventID returns a new event id (a UUIDv7: time-ordered, so ids sort
// and index well). Send sets one on an event without; set it yourself to
// know it in advance.
func NewEventID() string { return newID() }

func newID() string {
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

// changed wakes everyone waiting on c.notify; c.mu must be held.
func (c *Client) changed() {
	close(c.notify)
	c.notify = make(chan struct{})
}

// hasRoom reports whether it fits in the queue; c.mu must be held.
func (c *Client) hasRoom(it item) bool {
	if c.spool != nil {
		return c.spool.size()+int64(len(it.raw)+2) <= c.cfg.MaxSpoolBytes
	}
	return c.pending < int64(c.cfg.QueueSize)
}

func (c *Client) enqueue(ctx context.Context, it item, block bool) error {
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		if c.hasRoom(it) {
			break
		}
		if !block {
			c.mu.Unlock()
			return ErrQueueFull
		}
		ch := c.notify
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if b := c.cur; b != nil && (b.n+1 > c.cfg.MaxBatchEvents || b.size+it.size() > c.cfg.MaxBatchBytes) {
		if err := c.seal(); err != nil {
			return err
		}
	}
	if c.cur == nil {
		b := &batch{seq: c.seq, size: envelope, created: time.Now()}
		c.seq++
		if c.spool != nil {
			if err := c.spool.create(b); err != nil {
				return err
			}
		}
		c.cur = b
		c.unresolved[b.seq] = true
	}
	b := c.cur
	if c.spool != nil {
		// On disk only: a sender reads the batch back when it sends it, so
		// memory holds at most Concurrency batches however long the spool.
		if err := c.spool.append(b, it); err != nil {
			return err
		}
	} else {
		b.items = append(b.items, it)
	}
	b.n++
	b.size += it.size()
	c.pending++
	c.queued.Add(1)
	if b.n >= c.cfg.MaxBatchEvents {
		return c.seal()
	}
	return nil
}

// seal moves the open batch to the ready list; c.mu must be held.
func (c *Client) seal() error {
	b := c.cur
	if b == nil {
		return nil
	}
	c.cur = nil
	var err error
	if c.spool != nil {
		// On error the batch is still sent, read from its file, which
		// stays .open and is sent again (event ids dedupe) by a later
		// client.
		err = c.spool.seal(b)
	}
	c.ready = append(c.ready, b)
	c.changed()
	return err
}

// ticker seals a batch that has waited FlushInterval.
func (c *Client) ticker() {
	defer c.wg.Done()
	every := c.cfg.FlushInterval / 4
	if every < 5*time.Millisecond {
		every = 5 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stopCtx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		if c.cur != nil && time.Since(c.cur.created) >= c.cfg.FlushInterval {
			_ = c.seal() // a spool error shows again on the next Send
		}
		c.mu.Unlock()
	}
}

// sender sends ready batches until the client stops.
func (c *Client) sender() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		for len(c.ready) == 0 {
			ch := c.notify
			c.mu.Unlock()
			select {
			case <-c.stopCtx.Done():
				return
			case <-ch:
			}
			c.mu.Lock()
		}
		b := c.ready[0]
		c.ready = c.ready[1:]
		c.mu.Unlock()

		if !c.deliver(c.stopCtx, b) {
			// Stopped mid-way: Close deals with it.
			c.mu.Lock()
			c.ready = append([]*batch{b}, c.ready...)
			c.mu.Unlock()
			return
		}
	}
}

// resolve forgets a batch whose events were all delivered or dropped.
func (c *Client) resolve(b *batch) {
	if c.spool != nil {
		c.spool.remove(b)
	}
	c.mu.Lock()
	delete(c.unresolved, b.seq)
	c.pending -= int64(b.n)
	b.n = 0
	c.changed()
	c.mu.Unlock()
}

// dropItems reports items to OnDrop and counts them.
func (c *Client) dropItems(items []item, d Drop) {
	if len(items) == 0 {
		return
	}
	d.Events = make([]json.RawMessage, len(items))
	d.EventIDs = make([]string, len(items))
	for i, it := range items {
		d.Events[i] = json.RawMessage(it.raw)
		d.EventIDs[i] = it.id
	}
	c.dropped.Add(uint64(len(items)))
	if c.cfg.OnDrop != nil {
		c.cfg.OnDrop(d)
	}
}

// dropUnreadable reports n events of the spool that could not be read (a
// line that is not a JSON object, or a whole file): OnDrop gets err, which
// names the file and line, and no events.
func (c *Client) dropUnreadable(n int, err error) {
	if n <= 0 {
		return
	}
	c.dropped.Add(uint64(n))
	c.lastErr.Store(err.Error())
	if c.cfg.OnDrop != nil {
		c.cfg.OnDrop(Drop{Reason: DropSpoolError, Err: err})
	}
}

// Flush sends the open batch now and waits until every event queued before
// the call is delivered or dropped, or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	c.mu.Lock()
	if err := c.seal(); err != nil {
		c.mu.Unlock()
		return err
	}
	upTo := c.seq
	for {
		done := true
		for s := range c.unresolved {
			if s < upTo {
				done = false
				break
			}
		}
		if done {
			c.mu.Unlock()
			return nil
		}
		ch := c.notify
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
		c.mu.Lock()
	}
}

// Close stops taking events, flushes until ctx ends, and stops. Events not
// delivered by then are dropped (DropClosed) without a spool, or stay in
// the spool for the next client; either way Close returns an error
// wrapping ErrUndelivered. A Close with an already cancelled ctx stops at
// once, as a crash would, but without losing what the spool holds.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	sealErr := c.seal()
	c.changed()
	c.mu.Unlock()

	var flushErr error
	if ctx.Err() == nil {
		flushErr = c.Flush(ctx)
	} else {
		flushErr = ctx.Err()
	}
	c.stop()
	c.wg.Wait()

	c.mu.Lock()
	left := c.ready
	c.ready = nil
	c.mu.Unlock()
	var n int
	for _, b := range left {
		n += b.n
	}
	if c.spool != nil {
		if err := c.spool.close(); err != nil && sealErr == nil {
			sealErr = err
		}
	} else {
		for _, b := range left {
			l := b.last
			c.dropItems(b.items, Drop{Reason: DropClosed, Status: l.status, Code: l.code, Message: l.msg, RequestID: l.requestID, Err: errors.Join(flushErr, l.err)})
			c.resolve(b)
		}
	}
	if n > 0 {
		where := "dropped"
		if c.spool != nil {
			where = "left in the spool"
		}
		return fmt.Errorf("%w: %d events %s: %w", ErrUndelivered, n, where, errors.Join(flushErr, sealErr))
	}
	return sealErr
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	pending := c.pending
	var sb int64
	if c.spool != nil {
		sb = c.spool.size()
	}
	c.mu.Unlock()
	last, _ := c.lastErr.Load().(string)
	return Stats{
		Queued:     c.queued.Load(),
		Delivered:  c.delivered.Load(),
		Dropped:    c.dropped.Load(),
		Requests:   c.requests.Load(),
		Retries:    c.retries.Load(),
		Throttled:  c.throttled.Load(),
		Pending:    pending,
		SpoolBytes: sb,
		LastError:  last,
	}
}

// body writes the request body of items, adding sent_at now.
func body(buf *bytes.Buffer, items []item, now time.Time) {
	stamp := `{"sent_at":"` + now.UTC().Format(time.RFC3339Nano) + `",`
	buf.WriteString(`{"events":[`)
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		if it.stamp && len(it.raw) > 2 {
			buf.WriteString(stamp)
			buf.Write(it.raw[1:])
		} else {
			buf.Write(it.raw)
		}
	}
	buf.WriteString(`]}`)
}
