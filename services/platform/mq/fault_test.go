//go:build fault

package mq_test

import (
	"context"
	"testing"
	"time"

	"threatview/platform/mq"
	"threatview/platform/testenv"
)

// These tests restart the shared ActiveMQ, so they run only in the fault
// phase of `make test` (build tag fault, one package at a time).

func TestFault_PersistentMessageSurvivesBrokerRestart(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("mqfault")
	pub := mq.NewPublisher(cfg, discard())
	if err := pub.Send(context.Background(), queue, []byte(`{"survives":true}`), nil); err != nil {
		t.Fatalf("Send = %v", err)
	}
	pub.Close()

	testenv.Stack(t, "restart", "activemq")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := mq.Subscribe(ctx, cfg, queue, 1, discard())
	d := receive(t, sub, 60*time.Second)
	if string(d.Body) != `{"survives":true}` {
		t.Fatalf("body after restart = %q", d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("Ack = %v", err)
	}
}

func TestFault_SubscriberResumesAfterBrokerRestart(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("mqfault")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := mq.Subscribe(ctx, cfg, queue, 1, discard())
	testenv.MustPing(t, 30*time.Second, "subscription", func() error { return sub.Ready(ctx) })

	testenv.Stack(t, "restart", "activemq")

	// Sending only succeeds once the broker is back; the old subscriber must
	// then receive without being recreated.
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	testenv.MustPing(t, 60*time.Second, "broker after restart", func() error {
		return pub.Send(context.Background(), queue, []byte(`{"after":"restart"}`), nil)
	})
	d := receive(t, sub, 60*time.Second)
	if string(d.Body) != `{"after":"restart"}` {
		t.Fatalf("body = %q", d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("Ack = %v", err)
	}
}
