package mq_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"threatview/platform/mq"
)

// settledGoroutines waits until the goroutine count stops exceeding limit
// and returns the last count seen.
func settledGoroutines(limit int, within time.Duration) int {
	deadline := time.Now().Add(within)
	n := runtime.NumGoroutine()
	for n > limit && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		runtime.GC()
		n = runtime.NumGoroutine()
	}
	return n
}

// A broker that never confirms (or confirms too late) must not leave
// anything behind per timed-out send: go-stomp v3.1.3 keeps the orphaned
// receipt channel, and its connection goroutine then blocks forever on the
// late receipt or the close.
func TestPublisher_ReceiptTimeoutsDoNotLeak(t *testing.T) {
	var late atomic.Int64
	b := newFakeBroker(t, func(c *fakeConn, f *frame.Frame) {
		if f.Command != frame.SEND {
			return
		}
		// Every other send is confirmed late, after the client gave up;
		// the rest never are.
		if late.Add(1)%2 == 0 {
			go func() {
				time.Sleep(30 * time.Millisecond)
				receiptFor(c, f)
			}()
		}
	})
	cfg := mq.Config{Addr: b.addr(), Conns: 2, DialTimeout: time.Second,
		ReceiptTimeout: 5 * time.Millisecond, CloseTimeout: 10 * time.Millisecond}
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()

	// One round first, so lazily started runtime goroutines are counted in
	// the baseline.
	_ = pub.Send(context.Background(), "/queue/x", []byte("{}"), nil)
	base := settledGoroutines(0, 0)

	const sends = 1000
	for i := 0; i < sends; i++ {
		err := pub.Send(context.Background(), "/queue/x", []byte(`{"n":1}`), nil)
		if !errors.Is(err, mq.ErrUnavailable) || !errors.Is(err, mq.ErrUnconfirmed) {
			t.Fatalf("Send %d to a broker without receipts = %v, want ErrUnavailable and ErrUnconfirmed", i, err)
		}
	}
	if n := settledGoroutines(base+10, 10*time.Second); n > base+10 {
		t.Fatalf("goroutines after %d receipt timeouts = %d, want at most %d (baseline %d)", sends, n, base+10, base)
	}
}

// After a broker restart every pooled connection is dead; the next sends
// must all succeed on fresh ones.
func TestPublisher_ReplacesDeadConnections(t *testing.T) {
	b := newFakeBroker(t, receiptFor)
	cfg := mq.Config{Addr: b.addr(), Conns: 4, DialTimeout: time.Second,
		ReceiptTimeout: time.Second, CloseTimeout: 100 * time.Millisecond}
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	ctx := context.Background()

	// Fill the pool: four concurrent sends hold four connections.
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- pub.Send(ctx, "/queue/x", []byte("{}"), nil) }()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("Send before restart = %v", err)
		}
	}
	b.dropAll()
	time.Sleep(50 * time.Millisecond) // let the closes arrive

	for i := 0; i < 12; i++ {
		if err := pub.Send(ctx, "/queue/x", []byte("{}"), nil); err != nil {
			t.Fatalf("Send %d after the broker dropped every connection = %v, want nil", i, err)
		}
	}
	if err := pub.Ping(ctx); err != nil {
		t.Fatalf("Ping after recovery = %v, want nil", err)
	}
}

// Ping must prove a send would work now: a broker that accepts
// connections but confirms nothing (a stalled process) is not ready.
func TestPublisher_PingNeedsAReceipt(t *testing.T) {
	b := newFakeBroker(t, nil) // never answers anything after CONNECTED
	cfg := mq.Config{Addr: b.addr(), Conns: 1, DialTimeout: time.Second,
		ReceiptTimeout: 200 * time.Millisecond, CloseTimeout: 50 * time.Millisecond}
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := pub.Ping(ctx); !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Ping to a broker that never confirms = %v, want ErrUnavailable", err)
	}
}

// Idle pooled connections send the heart-beats the broker asks for.
func TestPublisher_HeartBeats(t *testing.T) {
	b := newFakeBroker(t, receiptFor)
	b.heartBeat = "0,100"
	cfg := mq.Config{Addr: b.addr(), Conns: 1, DialTimeout: time.Second,
		ReceiptTimeout: 500 * time.Millisecond, CloseTimeout: 50 * time.Millisecond,
		HeartBeat: 100 * time.Millisecond}
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	if err := pub.Send(context.Background(), "/queue/x", []byte("{}"), nil); err != nil {
		t.Fatalf("Send = %v", err)
	}
	time.Sleep(time.Second)
	conns := b.connections()
	if len(conns) != 1 {
		t.Fatalf("connections = %d, want 1", len(conns))
	}
	if n := conns[0].heartBeats(); n < 3 {
		t.Fatalf("heart-beats from an idle connection in 1 s at 100 ms = %d, want at least 3", n)
	}
}

// A send that never reached the broker is unavailable but not unconfirmed:
// the caller may say for sure that nothing was kept.
func TestPublisher_NotSentIsNotUnconfirmed(t *testing.T) {
	pub := mq.NewPublisher(mq.Config{Addr: "127.0.0.1:1", Conns: 1, DialTimeout: time.Second}, discard())
	defer pub.Close()
	err := pub.SendTx(context.Background(), []mq.Message{{Dest: "/queue/x", Body: []byte("{}")}})
	if !errors.Is(err, mq.ErrUnavailable) || errors.Is(err, mq.ErrUnconfirmed) {
		t.Fatalf("SendTx to a closed port = %v, want ErrUnavailable without ErrUnconfirmed", err)
	}
}

// fullStore plays ActiveMQ with a full store: each SEND waits wait
// (sendFailIfNoSpaceAfterTimeout) and is then refused. A SEND that asked for
// a receipt is answered ERROR; one that did not (inside a transaction) only
// marks the transaction rollback-only, and its COMMIT is answered ERROR. A
// COMMIT of a transaction whose refused SENDs asked for receipts commits
// whatever else the transaction holds, as ActiveMQ does: commits counts
// those. Other frames get their receipts. refused counts the refused SENDs.
func fullStore(wait time.Duration, refused, commits *atomic.Int32) func(c *fakeConn, f *frame.Frame) {
	rollbackOnly := map[string]bool{}
	return func(c *fakeConn, f *frame.Frame) {
		switch f.Command {
		case frame.SEND:
			time.Sleep(wait)
			refused.Add(1)
			if id, ok := f.Header.Contains(frame.Receipt); ok {
				c.write(frame.New(frame.ERROR, frame.ReceiptId, id, frame.Message, "Persistent store is Full, 100% of 209715200"))
				return
			}
			rollbackOnly[f.Header.Get(frame.Transaction)] = true
		case frame.COMMIT:
			if id, ok := f.Header.Contains(frame.Receipt); ok && rollbackOnly[f.Header.Get(frame.Transaction)] {
				c.write(frame.New(frame.ERROR, frame.ReceiptId, id, frame.Message, "Transaction marked rollback only"))
				return
			}
			commits.Add(1)
			receiptFor(c, f)
		default:
			receiptFor(c, f)
		}
	}
}

// A broker that refuses a send (store full) answers with an ERROR: the
// publisher reports it as a definite refusal at once, neither after its
// receipt timeout (outcome unknown) nor after sending the same frames again
// on a fresh connection, which would wait out the same refusal; and it
// never sends the COMMIT of a transaction whose SEND was refused (the
// broker would commit the transaction's other messages).
func TestPublisher_RefusalIsPromptAndDefinite(t *testing.T) {
	const wait = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		sends int32 // SEND frames the broker refuses
		send  func(p *mq.Publisher) error
	}{
		{"send", 1, func(p *mq.Publisher) error {
			return p.Send(context.Background(), "/queue/x", []byte("{}"), nil)
		}},
		// The transaction's second SEND is on the wire already and is
		// refused too, after the publisher answered: the timing is the test.
		{"transaction of two", 2, func(p *mq.Publisher) error {
			return p.SendTx(context.Background(), []mq.Message{{Dest: "/queue/x", Body: []byte("{}")}, {Dest: "/queue/y", Body: []byte("{}")}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refused, commits atomic.Int32
			b := newFakeBroker(t, fullStore(wait, &refused, &commits))
			// The receipt timeout is shorter than two refusals: a transaction
			// whose refusal came only at its COMMIT would time out.
			pub := mq.NewPublisher(mq.Config{Addr: b.addr(), Conns: 1, ReceiptTimeout: 500 * time.Millisecond}, discard())
			defer pub.Close()
			// A first round trip makes the pooled connection a reused one.
			if err := pub.Ping(context.Background()); err != nil {
				t.Fatalf("ping: %v", err)
			}
			began := time.Now()
			err := tc.send(pub)
			took := time.Since(began)
			if !errors.Is(err, mq.ErrRefused) || !errors.Is(err, mq.ErrUnavailable) || errors.Is(err, mq.ErrUnconfirmed) {
				t.Errorf("refused send = %v, want ErrRefused and ErrUnavailable without ErrUnconfirmed", err)
			}
			if took > 2*wait {
				t.Errorf("the refusal took %s, want about %s", took, wait)
			}
			pub.Close()
			time.Sleep(3 * wait) // the fake finishes what is on the wire
			if n := refused.Load(); n != tc.sends {
				t.Errorf("the broker refused %d SEND frames, want %d (not sent again on a fresh connection)", n, tc.sends)
			}
			if n := commits.Load(); n != 0 {
				t.Errorf("the broker got %d COMMIT frames after a refused SEND, want none (it would keep the refused request's other messages)", n)
			}
		})
	}
}
