package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"threatview/platform/pipeline"
	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

// runLeader runs l in the background; running receives fn's context each
// time l becomes leader, and fn blocks until that context ends.
func runLeader(t *testing.T, ctx context.Context, l *pipeline.Leader) (running chan context.Context, done chan error) {
	t.Helper()
	running = make(chan context.Context, 4)
	done = make(chan error, 1)
	go func() {
		done <- l.Run(ctx, func(fctx context.Context) error {
			running <- fctx
			<-fctx.Done()
			return nil
		})
	}()
	return running, done
}

func waitCtx(t *testing.T, c chan context.Context, what string) context.Context {
	t.Helper()
	select {
	case ctx := <-c:
		return ctx
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never became leader", what)
		return nil
	}
}

func TestLeader(t *testing.T) {
	url, pool := pgtest.MustEventsDB(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const poll = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	a := postgres.NewLeader(url, postgres.DefaultQueue, poll, nil, log)
	b := postgres.NewLeader(url, postgres.DefaultQueue, poll, nil, log)
	aRunning, aDone := runLeader(t, ctx, a)
	aCtx := waitCtx(t, aRunning, "first replica")
	if err := a.Ready(ctx); err != nil {
		t.Fatalf("leader Ready = %v, want nil", err)
	}

	bCtx, bCancel := context.WithCancel(context.Background())
	defer bCancel()
	bRunning, bDone := runLeader(t, bCtx, b)
	// The second replica waits and does not report ready.
	for i := 0; i < 5; i++ {
		time.Sleep(poll)
		select {
		case <-bRunning:
			t.Fatal("second replica became leader while the first holds the lock")
		default:
		}
	}
	if err := b.Ready(ctx); !errors.Is(err, pipeline.ErrNotLeader) {
		t.Fatalf("standby Ready = %v, want ErrNotLeader", err)
	}

	t.Run("LockConnectionDies", func(t *testing.T) {
		// Kill the leader's lock session, as a crash or a network cut would.
		var killed bool
		err := pool.QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed)
		if err != nil || !killed {
			t.Fatalf("terminate lock holder = %v, %v", killed, err)
		}
		select {
		case <-aCtx.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("first replica kept running after its lock connection died")
		}
		// Either replica may take the free lock; exactly one does.
		var leaderCtx context.Context
		select {
		case leaderCtx = <-aRunning:
			if err := b.Ready(ctx); err == nil {
				t.Fatal("both replicas report ready")
			}
		case leaderCtx = <-bRunning:
			if err := a.Ready(ctx); err == nil {
				t.Fatal("both replicas report ready")
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no replica took the lock again")
		}
		aCtx = leaderCtx // whichever leads now
	})

	t.Run("HandOverOnShutdown", func(t *testing.T) {
		// Stop whichever replica leads; the other takes over.
		if a.Ready(ctx) == nil {
			cancel()
			if err := <-aDone; err != nil {
				t.Fatalf("Run after cancel = %v, want nil", err)
			}
			waitCtx(t, bRunning, "second replica")
			bCancel()
			if err := <-bDone; err != nil {
				t.Fatalf("Run after cancel = %v, want nil", err)
			}
			return
		}
		bCancel()
		if err := <-bDone; err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
		waitCtx(t, aRunning, "first replica")
		cancel()
		if err := <-aDone; err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	})
}

// TestLeader_PerQueue checks one active processor per queue: the processors
// of two shards' queues lead side by side, a second one of the same shard
// waits.
func TestLeader_PerQueue(t *testing.T) {
	url, _ := pgtest.MustEventsDB(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const poll = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	def := postgres.NewLeader(url, postgres.DefaultQueue, poll, nil, log)
	s0 := postgres.NewLeader(url, "/queue/threatview.events.0", poll, nil, log)
	s1 := postgres.NewLeader(url, "/queue/threatview.events.1", poll, nil, log)
	s1b := postgres.NewLeader(url, "/queue/threatview.events.1", poll, nil, log)
	for _, l := range []struct {
		name string
		l    *pipeline.Leader
	}{{"the default queue's", def}, {"shard 0's", s0}, {"shard 1's", s1}} {
		running, _ := runLeader(t, ctx, l.l)
		waitCtx(t, running, l.name+" processor")
	}
	running, _ := runLeader(t, ctx, s1b)
	time.Sleep(5 * poll)
	select {
	case <-running:
		t.Fatal("a second processor of shard 1 leads beside the first")
	default:
	}
}
