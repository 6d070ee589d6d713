package mq_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

// fakeBroker is a test-local TCP peer that speaks just enough STOMP 1.2
// (CONNECT/CONNECTED, then frames handed to handle) to play a broker that
// misbehaves in ways a real one only does under faults: receipts that never
// come or come late, connections that die or go silent.
type fakeBroker struct {
	ln     net.Listener
	handle func(c *fakeConn, f *frame.Frame)
	// nagle leaves Nagle's algorithm on for the server side of every
	// connection, as a broker without tcpNoDelay does.
	nagle bool
	// heartBeat is the server's CONNECTED heart-beat header ("0,0" if blank).
	heartBeat string

	mu    sync.Mutex
	conns []*fakeConn
	wg    sync.WaitGroup
}

// fakeConn is one client connection seen by the fake broker.
type fakeConn struct {
	raw net.Conn
	wmu sync.Mutex
	w   *frame.Writer
	// beats counts heart-beats received from the client.
	mu    sync.Mutex
	beats int
}

func (c *fakeConn) write(f *frame.Frame) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.w.Write(f)
}

func (c *fakeConn) heartBeats() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.beats
}

func newFakeBroker(t *testing.T, handle func(c *fakeConn, f *frame.Frame)) *fakeBroker {
	t.Helper()
	return newFakeBrokerNagle(t, handle, false)
}

// newFakeBrokerNagle is newFakeBroker with Nagle's algorithm left on (nagle)
// or turned off on the broker's side of every connection.
func newFakeBrokerNagle(t *testing.T, handle func(c *fakeConn, f *frame.Frame), nagle bool) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	b := &fakeBroker{ln: ln, handle: handle, nagle: nagle}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

func (b *fakeBroker) accept() {
	defer b.wg.Done()
	for {
		raw, err := b.ln.Accept()
		if err != nil {
			return
		}
		if tcp, ok := raw.(*net.TCPConn); ok && b.nagle {
			_ = tcp.SetNoDelay(false)
		}
		c := &fakeConn{raw: raw, w: frame.NewWriter(raw)}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

func (b *fakeBroker) serve(c *fakeConn) {
	defer b.wg.Done()
	defer c.raw.Close()
	r := frame.NewReader(c.raw)
	for {
		f, err := r.Read()
		if err != nil {
			return
		}
		if f == nil {
			c.mu.Lock()
			c.beats++
			c.mu.Unlock()
			continue
		}
		switch f.Command {
		case frame.CONNECT, frame.STOMP:
			hb := b.heartBeat
			if hb == "" {
				hb = "0,0"
			}
			c.write(frame.New(frame.CONNECTED, frame.Version, "1.2", frame.HeartBeat, hb))
		default:
			if b.handle != nil {
				b.handle(c, f)
			}
		}
	}
}

// receipt answers f's receipt header, if any.
func receiptFor(c *fakeConn, f *frame.Frame) {
	if id, ok := f.Header.Contains(frame.Receipt); ok {
		c.write(frame.New(frame.RECEIPT, frame.ReceiptId, id))
	}
}

// dropAll closes every client connection, as a broker restart does.
func (b *fakeBroker) dropAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.raw.Close()
	}
}

func (b *fakeBroker) connections() []*fakeConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*fakeConn(nil), b.conns...)
}

func (b *fakeBroker) close() {
	_ = b.ln.Close()
	b.dropAll()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
