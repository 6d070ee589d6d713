package broker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"threatview/admininterface"
	"threatview/admininterface/broker"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

func mustBroker(t *testing.T) (*broker.Broker, *mq.Publisher) {
	t.Helper()
	if os.Getenv("STOMP_ADDR") == "" && !testenv.Required() {
		t.Skip("STOMP_ADDR not set")
	}
	cfg := testenv.MustBroker(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := mq.NewPublisher(cfg, log)
	t.Cleanup(func() { pub.Close() })
	return broker.New(cfg, pub, log), pub
}

func TestBroker_DeadLetters(t *testing.T) {
	b, pub := mustBroker(t)
	ctx := context.Background()
	main := testenv.Queue("admin.main")
	dlq := wire.DeadLetter(main)
	for i, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		if err := pub.Send(ctx, dlq, []byte(body), map[string]string{wire.HeaderDeadLetterReason: "reason " + string(rune('a'+i))}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}

	t.Run("Browse", func(t *testing.T) {
		msgs, complete, err := b.Browse(ctx, dlq, 10, true)
		if err != nil || !complete || len(msgs) != 3 {
			t.Fatalf("Browse = %d messages, complete %v, %v; want 3, true, nil", len(msgs), complete, err)
		}
		if msgs[0].Reason != "reason a" || string(msgs[0].Body) != `{"n":1}` || msgs[0].ID == "" {
			t.Fatalf("first message = %+v", msgs[0])
		}
		capped, complete, err := b.Browse(ctx, dlq, 2, false)
		if err != nil || complete || len(capped) != 2 || capped[0].Body != nil {
			t.Fatalf("Browse(max 2) = %d, complete %v, %v; want 2 without bodies, false", len(capped), complete, err)
		}
		// Browsing consumed nothing.
		again, _, _ := b.Browse(ctx, dlq, 10, false)
		if len(again) != 3 {
			t.Fatalf("after browsing, %d messages left, want 3", len(again))
		}
	})

	msgs, _, err := b.Browse(ctx, dlq, 10, true)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ReplayOne", func(t *testing.T) {
		n, err := b.Replay(ctx, dlq, main, msgs[1].ID, 1)
		if err != nil || n != 1 {
			t.Fatalf("Replay = %d, %v; want 1, nil", n, err)
		}
		got, _, _ := b.Browse(ctx, main, 10, true)
		if len(got) != 1 || string(got[0].Body) != `{"n":2}` || got[0].Headers["threatview-replayed-from"] != dlq {
			t.Fatalf("main queue after replay = %+v", got)
		}
		left, _, _ := b.Browse(ctx, dlq, 10, true)
		if len(left) != 2 || string(left[0].Body) != `{"n":1}` || string(left[1].Body) != `{"n":3}` {
			t.Fatalf("DLQ after replay has %d messages", len(left))
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := b.Replay(ctx, dlq, main, msgs[1].ID, 1); !errors.Is(err, admininterface.ErrNotFound) {
			t.Fatalf("Replay(replayed id) = %v, want ErrNotFound", err)
		}
		if err := b.Delete(ctx, dlq, "ID:nope'); --"); !errors.Is(err, admininterface.ErrNotFound) {
			t.Fatalf("Delete(unknown) = %v, want ErrNotFound", err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		if err := b.Delete(ctx, dlq, msgs[0].ID); err != nil {
			t.Fatalf("Delete = %v", err)
		}
		left, _, _ := b.Browse(ctx, dlq, 10, true)
		if len(left) != 1 || string(left[0].Body) != `{"n":3}` {
			t.Fatalf("DLQ after delete = %+v", left)
		}
	})

	t.Run("ReplayAll", func(t *testing.T) {
		n, err := b.Replay(ctx, dlq, main, "", 100)
		if err != nil || n != 1 {
			t.Fatalf("Replay(all) = %d, %v; want 1, nil", n, err)
		}
		left, _, _ := b.Browse(ctx, dlq, 10, false)
		got, _, _ := b.Browse(ctx, main, 10, false)
		if len(left) != 0 || len(got) != 2 {
			t.Fatalf("after replay all: DLQ %d, main %d; want 0, 2", len(left), len(got))
		}
	})
	if n, err := b.Purge(ctx, main, 100); err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2, nil", n, err)
	}
}

// TestBroker_BrowseLongQueue browses a queue far longer than what a browse
// keeps: the walk must stop and release its connection, never wait on
// frames nobody reads (it hung for ever before release drained them).
func TestBroker_BrowseLongQueue(t *testing.T) {
	b, pub := mustBroker(t)
	ctx := context.Background()
	q := testenv.Queue("admin.long")
	for i := 0; i < 300; i++ {
		if err := pub.Send(ctx, q, []byte(`{"i":1}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = b.Purge(context.Background(), q, 1000) })
	for round := 0; round < 3; round++ {
		done := make(chan error, 1)
		go func() {
			msgs, complete, err := b.Browse(ctx, q, 5, false)
			if err == nil && (len(msgs) != 5 || complete) {
				err = errors.New("wrong answer")
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Browse(max 5) of 300: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Browse(max 5) of a 300-message queue did not return within 15s")
		}
	}
	msgs, _, _ := b.Browse(ctx, q, 1000, false)
	last := msgs[len(msgs)-1]
	if m, err := b.Get(ctx, q, last.ID, 1000); err != nil || m.ID != last.ID {
		t.Fatalf("Get(the 300th message) = %v, %v", m.ID, err)
	}
	if _, err := b.Get(ctx, q, last.ID, 10); !errors.Is(err, admininterface.ErrNotFound) {
		t.Fatalf("Get beyond max = %v, want ErrNotFound", err)
	}
}

// TestBroker_BrowseLimit: ActiveMQ ends a browse after 400 messages as if
// the queue ended there. Browse reported such a queue complete (a depth of
// 400) before it knew the limit; it must say 400+.
func TestBroker_BrowseLimit(t *testing.T) {
	b, pub := mustBroker(t)
	ctx := context.Background()
	q := testenv.Queue("admin.limit")
	for i := 0; i < broker.BrowseLimit+100; i++ {
		if err := pub.Send(ctx, q, []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = b.Purge(context.Background(), q, 1000) })
	msgs, complete, err := b.Browse(ctx, q, 1000, false)
	if err != nil || complete || len(msgs) < broker.BrowseLimit {
		t.Fatalf("Browse of %d messages = %d, complete %v, %v; want at least %d and incomplete",
			broker.BrowseLimit+100, len(msgs), complete, err, broker.BrowseLimit)
	}
	if n, err := b.Purge(ctx, q, 1000); err != nil || n != broker.BrowseLimit+100 {
		t.Fatalf("Purge = %d, %v; want every message", n, err)
	}
}

// TestBroker_ReplayAllPastBrowseLimit: "replay all" moved at most what one
// browse shows (400); every message that was dead-lettered before the
// replay started must go, and one that arrives during it must stay (a
// message that fails again comes back, and must not be replayed for ever).
func TestBroker_ReplayAllPastBrowseLimit(t *testing.T) {
	b, pub := mustBroker(t)
	ctx := context.Background()
	main := testenv.Queue("admin.replayall")
	dlq := wire.DeadLetter(main)
	const n = broker.BrowseLimit + 50
	for i := 0; i < n; i++ {
		if err := pub.Send(ctx, dlq, []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = b.Purge(context.Background(), main, 0)
		_, _ = b.Purge(context.Background(), dlq, 0)
	})
	time.Sleep(20 * time.Millisecond)
	before := time.Now()
	time.Sleep(20 * time.Millisecond)
	if err := pub.Send(ctx, dlq, []byte(`{"late":true}`), nil); err != nil {
		t.Fatal(err)
	}
	var seen []int
	got, err := b.ReplayAll(ctx, dlq, main, before, func(k int) { seen = append(seen, k) })
	if err != nil || got != n {
		t.Fatalf("ReplayAll = %d, %v; want %d, nil", got, err, n)
	}
	if len(seen) != n || seen[n-1] != n {
		t.Errorf("progress called %d times, want %d", len(seen), n)
	}
	left, _, _ := b.Browse(ctx, dlq, 10, true)
	if len(left) != 1 || string(left[0].Body) != `{"late":true}` {
		t.Fatalf("DLQ after replay all holds %d messages, want only the one that came later", len(left))
	}
	if moved, err := b.Purge(ctx, main, 0); err != nil || moved != n {
		t.Fatalf("the target queue holds %d (%v), want %d", moved, err, n)
	}
}
