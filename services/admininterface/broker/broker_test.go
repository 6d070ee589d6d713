package broker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"

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
