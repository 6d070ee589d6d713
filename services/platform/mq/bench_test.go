package mq_test

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	"threatview/platform/mq"
	"threatview/platform/testenv"
)

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPublisher_SendTx is the collector's broker hop: one transaction
// with a 4 KiB events message and a 1 KiB audit message, committed with a
// receipt, against the real broker. cpu-µs/op is this process's CPU (the
// broker's is not counted).
func BenchmarkPublisher_SendTx(b *testing.B) {
	cfg := testenv.MustBroker(b)
	q1, q2 := testenv.Queue("mqbench"), testenv.Queue("mqbench")
	ctx := context.Background()
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	msgs := []mq.Message{
		{Dest: q1, Body: bytes.Repeat([]byte("e"), 4<<10)},
		{Dest: q2, Body: bytes.Repeat([]byte("a"), 1<<10)},
	}
	if err := pub.SendTx(ctx, msgs); err != nil {
		b.Fatalf("SendTx = %v", err)
	}
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if err := pub.SendTx(ctx, msgs); err != nil {
			b.Fatalf("SendTx = %v", err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.StopTimer()
	// Leave the broker as found (acking every 100: the broker pages 200
	// messages of a queue at a time, so no more are unacknowledged at once).
	for _, q := range []string{q1, q2} {
		dctx, cancel := context.WithCancel(ctx)
		sub := mq.Subscribe(dctx, cfg, q, 100, discard())
		var ds []*mq.Delivery
		for n := 0; n < b.N+1; n++ {
			select {
			case d := <-sub.C():
				ds = append(ds, d)
				if len(ds) == 100 {
					mq.AckThrough(ds)
					ds = ds[:0]
				}
			case <-time.After(10 * time.Second):
				b.Fatalf("drained %d of %d messages of %s", n, b.N+1, q)
			}
		}
		mq.AckThrough(ds)
		cancel()
		<-sub.Done()
	}
}
