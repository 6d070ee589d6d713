package mq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"threatview/platform/mq"
	"threatview/platform/testenv"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// receive waits for one delivery or fails the test.
func receive(t *testing.T, s *mq.Subscriber, within time.Duration) *mq.Delivery {
	t.Helper()
	select {
	case d, ok := <-s.C():
		if !ok {
			t.Fatalf("subscription closed before a delivery")
		}
		return d
	case <-time.After(within):
		t.Fatalf("no delivery within %s", within)
	}
	return nil
}

func TestPublisher_Send(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("mq")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	for i := 0; i < 3; i++ {
		if err := pub.Send(ctx, queue, []byte(fmt.Sprintf(`{"n":%d}`, i)), map[string]string{"x-test": "yes"}); err != nil {
			t.Fatalf("Send(%d) = %v, want nil", i, err)
		}
	}

	sub := mq.Subscribe(ctx, cfg, queue, 10, discard())
	for i := 0; i < 3; i++ {
		d := receive(t, sub, 10*time.Second)
		if want := fmt.Sprintf(`{"n":%d}`, i); string(d.Body) != want {
			t.Errorf("delivery %d body = %q, want %q", i, d.Body, want)
		}
		if got := d.Header("x-test"); got != "yes" {
			t.Errorf("delivery %d header x-test = %q, want yes", i, got)
		}
		if got := d.Header("persistent"); got != "true" {
			t.Errorf("delivery %d header persistent = %q, want true", i, got)
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("Ack = %v", err)
		}
	}
}

func TestSubscriber_UnackedIsRedelivered(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("mq")
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	if err := pub.Send(context.Background(), queue, []byte(`{"once":true}`), nil); err != nil {
		t.Fatalf("Send = %v", err)
	}

	ctx1, cancel1 := context.WithCancel(context.Background())
	sub1 := mq.Subscribe(ctx1, cfg, queue, 1, discard())
	first := receive(t, sub1, 10*time.Second)
	cancel1() // leave without acking
	<-sub1.Done()

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	sub2 := mq.Subscribe(ctx2, cfg, queue, 1, discard())
	again := receive(t, sub2, 10*time.Second)
	if string(again.Body) != string(first.Body) {
		t.Fatalf("redelivered body = %q, want %q", again.Body, first.Body)
	}
	if !again.Redelivered() {
		t.Errorf("Redelivered() = false on a second delivery")
	}
	if err := again.Ack(); err != nil {
		t.Fatalf("Ack = %v", err)
	}
}

func TestPublisher_BrokerDown(t *testing.T) {
	cfg := mq.Config{Addr: "127.0.0.1:1", Conns: 1, DialTimeout: time.Second, ReceiptTimeout: time.Second}
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	err := pub.Send(context.Background(), "/queue/nowhere", []byte("{}"), nil)
	if !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Send to a closed port = %v, want ErrUnavailable", err)
	}
	if err := pub.Ping(context.Background()); !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Ping to a closed port = %v, want ErrUnavailable", err)
	}
}

func TestSubscriber_ReadyTracksConnection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := mq.Subscribe(ctx, mq.Config{Addr: "127.0.0.1:1", DialTimeout: time.Second}, "/queue/nowhere", 1, discard())
	if err := sub.Ready(ctx); !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Ready with no broker = %v, want ErrUnavailable", err)
	}
	cancel()
	select {
	case <-sub.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("subscriber did not stop after cancel")
	}
}

func TestPublisher_SendTx(t *testing.T) {
	cfg := testenv.MustBroker(t)
	q1, q2 := testenv.Queue("mqtx"), testenv.Queue("mqtx")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	if err := pub.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v, want nil", err)
	}
	err := pub.SendTx(ctx, []mq.Message{
		{Dest: q1, Body: []byte(`{"a":1}`)},
		{Dest: q2, Body: []byte(`{"b":2}`), Headers: map[string]string{"x-test": "tx"}},
	})
	if err != nil {
		t.Fatalf("SendTx = %v, want nil", err)
	}
	for _, want := range []struct{ q, body string }{{q1, `{"a":1}`}, {q2, `{"b":2}`}} {
		sub := mq.Subscribe(ctx, cfg, want.q, 1, discard())
		d := receive(t, sub, 10*time.Second)
		if string(d.Body) != want.body {
			t.Errorf("body on %s = %q, want %q", want.q, d.Body, want.body)
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("Ack = %v", err)
		}
	}
}

// TestSubscriber_AckThroughIsCumulative: one AckThrough over the first five
// of ten deliveries acknowledges exactly those five; after a reconnect the
// broker redelivers the other five and nothing else.
func TestSubscriber_AckThroughIsCumulative(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("mq")
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	for i := 0; i < 10; i++ {
		if err := pub.Send(context.Background(), queue, []byte(fmt.Sprint(i)), nil); err != nil {
			t.Fatalf("Send(%d) = %v", i, err)
		}
	}

	ctx1, cancel1 := context.WithCancel(context.Background())
	sub1 := mq.Subscribe(ctx1, cfg, queue, 10, discard())
	var ds []*mq.Delivery
	for i := 0; i < 10; i++ {
		ds = append(ds, receive(t, sub1, 10*time.Second))
	}
	if got := mq.AckThrough(ds[:5]); got != 5 {
		t.Fatalf("AckThrough(first 5) = %d, want 5", got)
	}
	cancel1() // leave the other five unacknowledged
	<-sub1.Done()

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	sub2 := mq.Subscribe(ctx2, cfg, queue, 10, discard())
	var again []*mq.Delivery
	for i := 5; i < 10; i++ {
		d := receive(t, sub2, 10*time.Second)
		if string(d.Body) != fmt.Sprint(i) {
			t.Fatalf("redelivery %d = %q, want %q (acked messages came back or order changed)", i-5, d.Body, fmt.Sprint(i))
		}
		again = append(again, d)
	}
	select {
	case d := <-sub2.C():
		t.Fatalf("unexpected delivery %q after the five unacknowledged ones", d.Body)
	case <-time.After(500 * time.Millisecond):
	}
	if got := mq.AckThrough(again); got != 5 {
		t.Fatalf("AckThrough(redelivered) = %d, want 5", got)
	}
	cancel2()
	<-sub2.Done()

	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	sub3 := mq.Subscribe(ctx3, cfg, queue, 10, discard())
	select {
	case d := <-sub3.C():
		t.Fatalf("delivery %q after everything was acknowledged", d.Body)
	case <-time.After(time.Second):
	}
}
