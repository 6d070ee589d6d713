package mq_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"threatview/platform/mq"
	"threatview/platform/testenv"
)

// The one-outcome rule of the collector rests on the broker dropping a
// transaction whose connection ends before COMMIT: a send cut short keeps
// nothing. This checks that on the real ActiveMQ, with a raw STOMP session.
func TestBroker_UncommittedTransactionKeepsNothing(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("mqtx")
	raw, err := net.DialTimeout("tcp", cfg.Addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	w, r := frame.NewWriter(raw), frame.NewReader(raw)
	connect := frame.New(frame.CONNECT, frame.AcceptVersion, "1.2", frame.Host, cfg.Host)
	if cfg.Login != "" {
		connect.Header.Add(frame.Login, cfg.Login)
		connect.Header.Add(frame.Passcode, cfg.Passcode)
	}
	if err := w.Write(connect); err != nil {
		t.Fatalf("CONNECT: %v", err)
	}
	if f, err := r.Read(); err != nil || f == nil || f.Command != frame.CONNECTED {
		t.Fatalf("CONNECT answered %v, %v", f, err)
	}
	send := frame.New(frame.SEND, frame.Destination, queue, frame.Transaction, "tx-cut", "persistent", "true")
	send.Body = []byte(`{"cut":true}`)
	for _, f := range []*frame.Frame{frame.New(frame.BEGIN, frame.Transaction, "tx-cut"), send} {
		if err := w.Write(f); err != nil {
			t.Fatalf("write %s: %v", f.Command, err)
		}
	}
	raw.Close() // the connection ends before COMMIT

	// A committed message after it shows the queue works and bounds the wait.
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	if err := pub.SendTx(context.Background(), []mq.Message{{Dest: queue, Body: []byte(`{"committed":true}`)}}); err != nil {
		t.Fatalf("SendTx = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := mq.Subscribe(ctx, cfg, queue, 10, discard())
	d := receive(t, sub, 10*time.Second)
	if string(d.Body) != `{"committed":true}` {
		t.Fatalf("first delivery = %s, want only the committed message", d.Body)
	}
	_ = d.Ack()
	select {
	case d := <-sub.C():
		t.Fatalf("delivery of %s from a transaction that never committed", d.Body)
	case <-time.After(2 * time.Second):
	}
}
