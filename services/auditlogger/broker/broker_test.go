package broker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/auditlogger/broker"
	"threatview/auditlogger/internal/audittest"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// gateSender blocks every send until released, and records the bodies.
type gateSender struct {
	mu      sync.Mutex
	bodies  [][]byte
	started chan struct{}
	release chan struct{}
	err     error
}

func (g *gateSender) Send(ctx context.Context, dest string, body []byte, _ map[string]string) error {
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bodies = append(g.bodies, body)
	return g.err
}

func TestGroupPublisher_Coalesces(t *testing.T) {
	g := &gateSender{started: make(chan struct{}, 100), release: make(chan struct{})}
	p := broker.NewGroupPublisher(g, "/queue/x", broker.Options{Concurrency: 1}, nil, discard)
	defer p.Close()
	ctx := context.Background()
	t0 := time.Now()

	errs := make(chan error, 100)
	go func() { errs <- p.Publish(ctx, audittest.Records(1, t0)) }()
	<-g.started // the first message is in flight; the next posts must wait and join
	const later = 20
	for i := 0; i < later; i++ {
		go func() { errs <- p.Publish(ctx, audittest.Records(2, t0)) }()
	}
	// Give the later posts time to reach the batcher before the first send
	// returns (a late one would only make a third message).
	time.Sleep(500 * time.Millisecond)
	close(g.release)
	for i := 0; i < later+1; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("Publish = %v", err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bodies) < 2 || len(g.bodies) > 3 {
		t.Fatalf("%d broker messages for %d posts, want 2 (one in flight, then one for the rest)", len(g.bodies), later+1)
	}
	total := 0
	for _, b := range g.bodies {
		batch, err := wire.DecodeAuditBatch(b)
		if err != nil {
			t.Fatalf("message does not decode: %v", err)
		}
		total += len(batch.Records)
	}
	if total != 1+2*later {
		t.Fatalf("%d records in messages, want %d", total, 1+2*later)
	}
}

func TestGroupPublisher_SendError(t *testing.T) {
	g := &gateSender{started: make(chan struct{}, 10), release: make(chan struct{}), err: mq.ErrUnavailable}
	close(g.release)
	p := broker.NewGroupPublisher(g, "/queue/x", broker.Options{Concurrency: 2, Window: time.Millisecond}, nil, discard)
	defer p.Close()
	err := p.Publish(context.Background(), audittest.Records(3, time.Now()))
	if !errors.Is(err, auditlogger.ErrUnavailable) {
		t.Fatalf("Publish = %v, want ErrUnavailable", err)
	}
}

func TestGroupPublisher_SizeLimit(t *testing.T) {
	g := &gateSender{started: make(chan struct{}, 100), release: make(chan struct{})}
	close(g.release)
	p := broker.NewGroupPublisher(g, "/queue/x", broker.Options{Concurrency: 1, Window: 50 * time.Millisecond, MaxMessageBytes: 2048}, nil, discard)
	defer p.Close()
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Publish(context.Background(), audittest.Records(2, time.Now())); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	total := 0
	for _, b := range g.bodies {
		batch, err := wire.DecodeAuditBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		total += len(batch.Records)
		if len(batch.Records) > 2 && len(b) > 2048+64 {
			t.Fatalf("message of %d bytes with %d records, limit 2048", len(b), len(batch.Records))
		}
	}
	if total != 20 || len(g.bodies) < 5 {
		t.Fatalf("%d records in %d messages, want 20 in at least 5", total, len(g.bodies))
	}
}

// TestGroupPublisher_Broker publishes through the real broker and reads the
// message back from the queue.
func TestGroupPublisher_Broker(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("audit")
	mqp := mq.NewPublisher(cfg, discard)
	defer mqp.Close()
	p := broker.NewGroupPublisher(mqp, queue, broker.Options{Concurrency: 2, Window: 2 * time.Millisecond}, nil, discard)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		recs := audittest.Records(1, time.Now())
		want[recs[0].ID] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Publish(ctx, recs); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	sub := mq.Subscribe(ctx, cfg, queue, 100, discard)
	got := 0
	for got < len(want) {
		select {
		case d := <-sub.C():
			b, err := wire.DecodeAuditBatch(d.Body)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range b.Records {
				if !want[r.ID] {
					t.Fatalf("unexpected record %s", r.ID)
				}
				got++
			}
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("got %d of %d records from the queue", got, len(want))
		}
	}
	cancel()
	<-sub.Done()
}

func BenchmarkGroupPublisher_Broker(b *testing.B) {
	cfg := testenv.MustBroker(b)
	cfg.Conns = 4
	queue := testenv.Queue("auditbench")
	mqp := mq.NewPublisher(cfg, discard)
	defer mqp.Close()
	p := broker.NewGroupPublisher(mqp, queue, broker.Options{Concurrency: 4, Window: 2 * time.Millisecond}, nil, discard)
	defer p.Close()
	recs := audittest.Records(1, time.Now())
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.Publish(context.Background(), recs); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	// Drain the queue so the broker does not keep the benchmark's messages.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub := mq.Subscribe(ctx, cfg, queue, 500, discard)
	idle := time.NewTimer(time.Second)
	for {
		select {
		case d := <-sub.C():
			_ = d.Ack()
			idle.Reset(time.Second)
			continue
		case <-idle.C:
		case <-ctx.Done():
		}
		break
	}
	cancel()
	<-sub.Done()
}
