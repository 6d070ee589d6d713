package mq_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"threatview/platform/mq"
)

// TestPublisher_NagleBrokerDoesNotStall plays a broker that keeps Nagle's
// algorithm on (Amazon MQ's connectors cannot be configured) and answers each
// SEND of a transaction with its own small RECEIPT write. Without quick ACKs
// on the client, every second receipt waited for the client's delayed ACK
// (40 ms on Linux), so each transaction took about 40 ms on loopback
// (issue 36: 105 req/s answered at a p50 of 50 ms). A transaction here is a
// few loopback round trips; the median must stay far below the timer.
func TestPublisher_NagleBrokerDoesNotStall(t *testing.T) {
	b := newFakeBrokerNagle(t, receiptFor, true)
	cfg := mq.Config{Addr: b.addr(), Conns: 1, DialTimeout: time.Second,
		ReceiptTimeout: 2 * time.Second, CloseTimeout: 100 * time.Millisecond}
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	ctx := context.Background()
	msgs := []mq.Message{
		{Dest: "/queue/events", Body: []byte(`{"n":1}`)},
		{Dest: "/queue/audit", Body: []byte(`{"n":2}`)},
		{Dest: "/queue/audit", Body: []byte(`{"n":3}`)},
	}
	var took []time.Duration
	for range 25 {
		start := time.Now()
		if err := pub.SendTx(ctx, msgs); err != nil {
			t.Fatalf("SendTx = %v", err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	// The delayed-ACK timer is 40 ms (at least 20 ms on any Linux); a
	// loaded machine's loopback round trips stay well under 15 ms.
	if med := took[len(took)/2]; med >= 15*time.Millisecond {
		t.Fatalf("median transaction against a Nagle broker took %s (all: %v): a delayed-ACK stall", med, took)
	}
}
