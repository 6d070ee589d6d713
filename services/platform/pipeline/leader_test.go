package pipeline_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/platform/pipeline"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeLocker hands out one lease at a time; its Acquire fails failFirst
// times first. The real lockers are tested against their databases: the
// PostgreSQL advisory lock in platform/pglock, MariaDB's GET_LOCK in the
// audit worker.
type fakeLocker struct {
	failFirst atomic.Int32
	acquired  atomic.Int32
	mu        sync.Mutex
	leases    []*fakeLease
}

type fakeLease struct {
	lost     atomic.Bool
	released atomic.Bool
}

var errLost = errors.New("lock connection gone")

func (l *fakeLocker) Acquire(ctx context.Context) (pipeline.Lease, error) {
	if l.failFirst.Add(-1) >= 0 {
		return nil, errors.New("database unavailable")
	}
	l.acquired.Add(1)
	le := &fakeLease{}
	l.mu.Lock()
	l.leases = append(l.leases, le)
	l.mu.Unlock()
	return le, nil
}

func (l *fakeLocker) lease(i int) *fakeLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leases[i]
}

func (le *fakeLease) Check(context.Context) error {
	if le.lost.Load() {
		return errLost
	}
	return nil
}

func (le *fakeLease) Release() { le.released.Store(true) }

func recv[T any](t *testing.T, c chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func TestLeader_LosesAndRetakesTheLock(t *testing.T) {
	locker := &fakeLocker{}
	locker.failFirst.Store(2) // the database is down at first: Acquire is retried
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_leader"})
	l := pipeline.NewLeader(locker, pipeline.LeaderConfig{CheckEvery: 5 * time.Millisecond, Gauge: gauge}, quiet)
	if err := l.Ready(context.Background()); !errors.Is(err, pipeline.ErrNotLeader) {
		t.Fatalf("Ready before the lock = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan context.Context, 4)
	done := make(chan error, 1)
	go func() {
		done <- l.Run(ctx, func(fctx context.Context) error {
			running <- fctx
			<-fctx.Done()
			return nil
		})
	}()
	first := recv(t, running, "first term")
	if err := l.Ready(ctx); err != nil || testutil.ToFloat64(gauge) != 1 {
		t.Fatalf("leading: Ready = %v, gauge = %v", err, testutil.ToFloat64(gauge))
	}

	locker.lease(0).lost.Store(true)
	<-first.Done()
	if cause := context.Cause(first); !errors.Is(cause, errLost) {
		t.Errorf("fn's context cause = %v, want the check's error", cause)
	}
	second := recv(t, running, "second term after the lock was lost")
	if !locker.lease(0).released.Load() {
		t.Error("lost lease not released")
	}
	if locker.acquired.Load() != 2 {
		t.Errorf("acquired %d times, want 2", locker.acquired.Load())
	}

	cancel()
	if err := recv(t, done, "Run to return"); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	if second.Err() == nil || !locker.lease(1).released.Load() {
		t.Error("shutdown did not end the term and release the lock")
	}
	if l.Ready(context.Background()) == nil || testutil.ToFloat64(gauge) != 0 {
		t.Errorf("after Run: Ready = nil or gauge = %v", testutil.ToFloat64(gauge))
	}
}

func TestLeader_FnErrorIsReturned(t *testing.T) {
	locker := &fakeLocker{}
	l := pipeline.NewLeader(locker, pipeline.LeaderConfig{}, quiet)
	boom := errors.New("boom")
	if err := l.Run(context.Background(), func(context.Context) error { return boom }); err != boom {
		t.Fatalf("Run = %v, want fn's error", err)
	}
	if !locker.lease(0).released.Load() {
		t.Error("lease not released")
	}
}

func TestLeader_StopsWhileWaiting(t *testing.T) {
	locker := &fakeLocker{}
	locker.failFirst.Store(1 << 30)
	l := pipeline.NewLeader(locker, pipeline.LeaderConfig{}, quiet)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := l.Run(ctx, func(context.Context) error { t.Error("fn ran without the lock"); return nil }); err != nil {
		t.Fatalf("Run = %v, want nil at ctx end", err)
	}
}
