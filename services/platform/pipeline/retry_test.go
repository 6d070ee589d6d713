package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"threatview/platform/pipeline"
)

func TestBackoff_Wait(t *testing.T) {
	b := pipeline.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	for n, full := range []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000} {
		full *= time.Millisecond
		seen := map[time.Duration]bool{}
		for range 200 {
			w := b.Wait(n)
			if w < full/2 || w > full {
				t.Fatalf("Wait(%d) = %s, want within [%s, %s]", n, w, full/2, full)
			}
			seen[w] = true
		}
		if len(seen) < 10 {
			t.Errorf("Wait(%d) took %d distinct values in 200 draws: no jitter", n, len(seen))
		}
	}
	if w := b.Wait(1000); w > b.Max {
		t.Errorf("Wait(1000) = %s, above Max", w)
	}
}

var errTransient = errors.New("database unavailable")

func TestRetry(t *testing.T) {
	fast := pipeline.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}
	t.Run("OK after transient errors", func(t *testing.T) {
		calls, retries := 0, 0
		err := pipeline.Retry(context.Background(), fast, func() error {
			if calls++; calls < 4 {
				return errTransient
			}
			return nil
		}, func(err error, wait time.Duration) {
			if !errors.Is(err, errTransient) || wait <= 0 {
				t.Errorf("onRetry(%v, %s)", err, wait)
			}
			retries++
		})
		if err != nil || calls != 4 || retries != 3 {
			t.Fatalf("Retry = %v after %d calls, %d retries; want nil, 4, 3", err, calls, retries)
		}
	})
	t.Run("Permanent stops at once", func(t *testing.T) {
		calls := 0
		err := pipeline.Retry(context.Background(), fast, func() error {
			calls++
			return pipeline.Permanent(errTransient)
		}, nil)
		if err != errTransient || calls != 1 {
			t.Fatalf("Retry = %v after %d calls, want errTransient after 1", err, calls)
		}
	})
	t.Run("Stops when ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var calls atomic.Int32
		time.AfterFunc(50*time.Millisecond, cancel)
		err := pipeline.Retry(ctx, pipeline.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}, func() error {
			calls.Add(1)
			return errTransient
		}, nil)
		if !errors.Is(err, errTransient) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Retry = %v, want errTransient and context.Canceled", err)
		}
		if n := calls.Load(); n < 2 || n > 20 {
			t.Errorf("%d calls in 50 ms at 5-10 ms waits", n)
		}
	})
	if pipeline.Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
}

func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipeline.Every(ctx, 10*time.Millisecond, func() {
			if n.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not return after ctx ended")
	}
	if n.Load() != 3 {
		t.Fatalf("f ran %d times, want 3", n.Load())
	}
}

func TestSleep(t *testing.T) {
	if !pipeline.Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep = false without cancellation")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if pipeline.Sleep(ctx, time.Minute) || time.Since(start) > time.Second {
		t.Error("Sleep did not stop at ctx end")
	}
}
