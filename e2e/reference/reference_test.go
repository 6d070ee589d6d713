//go:build reference

// Package reference guards the one number the reference product publishes:
// 105 requests/s answered at a p95 of 20 ms, through the real stack with
// auditing on, as deployed. scripts/test.sh runs it alone, between the
// module tests and the S3 phase, so the other tests' load does not stand in
// for a stall; every other speed lives in `make bench`.
package reference

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/loadtest/load"
	"threatview/loadtest/sim"
)

const (
	referenceRate = 105              // requests/s, the reference's published peak
	measured      = 12 * time.Second // at least 10 s, as the promise is stated
	warmup        = 3 * time.Second
	p95Limit      = 20 * time.Millisecond
	// A fixed stall (Nagle meeting a delayed ACK: 40 ms) moves the median,
	// not only the tail, while one request at a time stays fast: the median
	// under load may be at most stallFactor times the sequential median
	// (with a floor, since a sequential median of 2 ms would make 6 ms a
	// failure on a busy box).
	stallFactor = 3
	medianFloor = 10 * time.Millisecond
	// Two attempts: a stall fails both; a burst of CI's own work (a
	// compile, a checkpoint) fails at most one.
	attempts = 2
)

// TestReferencePromise runs the reference's 105 req/s for 12 s through the
// running collector and fails when the p95 passes 20 ms or the median shows
// a stall against the sequential latency measured in the same test.
func TestReferencePromise(t *testing.T) {
	env := e2etest.MustEnv(t)
	e2etest.Healthy(t, env)
	app := e2etest.NewApp(t, env, "ref")
	ctx := context.Background()
	tgt := load.Target{URL: env.CollectorURL, Token: app.Token}

	var failures []string
	for attempt := 1; attempt <= attempts; attempt++ {
		seq := sequentialMedian(t, env, app)
		gen := newGen(t, app.ID, uint64(attempt))
		if _, err := load.Open(ctx, tgt, gen, "warm-up", referenceRate, warmup, nil, nil); err != nil {
			t.Fatalf("warm-up: %v", err)
		}
		pre, err := load.PregenerateFor(gen, referenceRate, measured)
		if err != nil {
			t.Fatalf("generate: %v", err)
		}
		res, err := load.Open(ctx, tgt, pre, "reference", referenceRate, measured, nil, nil)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		s := res.Summary()
		t.Logf("attempt %d: sequential median %s; at %d req/s for %s: %d requests, %d failed, p50 %s, p95 %s, p99 %s, max %s",
			attempt, seq, referenceRate, measured, s.Samples, s.Failed, s.Median, s.P95, s.P99, s.Max)
		if s.Failed > 0 || res.Accepted != s.Samples {
			// A refused request at the reference's rate is a broken promise,
			// not noise: no second attempt.
			t.Fatalf("%d of %d requests not accepted (codes %v, errors %v)", s.Samples-res.Accepted, s.Samples, res.Codes, res.Errors)
		}
		why := judge(seq, s.Median, s.P95)
		if why == "" {
			return
		}
		failures = append(failures, why)
	}
	t.Fatalf("the reference's promise (105 req/s at p95 <= 20 ms) is broken in %d of %d attempts: %v", len(failures), attempts, failures)
}

// judge says why a run breaks the promise, or "" when it holds.
func judge(seq, p50, p95 time.Duration) string {
	switch {
	case p95 > p95Limit:
		return fmt.Sprintf("p95 %s over %s", p95, p95Limit)
	case p50 > max(stallFactor*seq, medianFloor):
		return fmt.Sprintf("median %s over %dx the sequential %s", p50, stallFactor, seq)
	}
	return ""
}

func TestJudge(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		seq, p50, p95 time.Duration
		ok            bool
	}{
		{4 * ms, 5 * ms, 9 * ms, true},
		{4 * ms, 50 * ms, 59 * ms, false}, // the 40 ms stall of issue 36
		{4 * ms, 9 * ms, 21 * ms, false},  // a tail past the promise
		{2 * ms, 9 * ms, 15 * ms, true},   // within the floor
		{4 * ms, 13 * ms, 18 * ms, false}, // the median moved
	}
	for _, tc := range tests {
		if got := judge(tc.seq, tc.p50, tc.p95) == ""; got != tc.ok {
			t.Errorf("judge(%s, %s, %s) ok = %v, want %v", tc.seq, tc.p50, tc.p95, got, tc.ok)
		}
	}
}

// sequentialMedian posts 40 single events one after another and returns
// the median latency: the stack's own speed on this machine right now.
func sequentialMedian(t *testing.T, env e2etest.Env, app e2etest.App) time.Duration {
	t.Helper()
	var lat []time.Duration
	for range 40 {
		body := e2etest.GoodEvent(app.ID, e2etest.UUID())
		start := time.Now()
		r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, body,
			map[string]string{"Content-Type": "application/json"})
		lat = append(lat, time.Since(start))
		if r.Status != http.StatusAccepted {
			t.Fatalf("sequential post: %d %s", r.Status, r.Body)
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2]
}

func newGen(t *testing.T, appID string, seed uint64) *sim.Generator {
	t.Helper()
	gen, err := sim.New(sim.Config{AppID: appID, Seed: seed, EventIDs: true})
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	return gen
}
