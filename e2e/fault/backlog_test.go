//go:build fault

package fault

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/e2e/internal/e2etest"
	"threatview/loadtest/procstat"
	"threatview/loadtest/verify"
	"threatview/platform/testenv"
)

// TestFaultBacklogBufferedOnDisk stops the processor and floods the
// collector with gzip batches until the backlog is about ten times the
// 145 MB at which the broker used to run out of memory (issue 28): every
// request must be 202 while the broker's RSS stays bounded, and after the
// processor comes back every accepted event must be stored exactly once,
// with exact rollups. THREATVIEW_FAULT_BACKLOG_MB sizes the backlog
// (uncompressed request bytes; default 1500, in events of about 6 KB).
func TestFaultBacklogBufferedOnDisk(t *testing.T) {
	env := e2etest.MustEnv(t)
	target := int64(1500)
	if v, err := strconv.ParseInt(os.Getenv("THREATVIEW_FAULT_BACKLOG_MB"), 10, 64); err == nil && v > 0 {
		target = v
	}
	target *= 1e6
	t.Cleanup(func() { testenv.Stack(t, "start", "processor") })
	waitAllReady(t, env, 120*time.Second)
	app := e2etest.NewApp(t, env, "e2e-backlog")
	logFrom := brokerLogSize(t)
	rssBefore := brokerRSS(t)

	testenv.Stack(t, "stop", "processor")
	// Events of about 6 KB, 80 a request: the backlog's bytes are what the
	// broker must hold; fewer, larger events keep the drain and the rollup
	// check (PostgreSQL's rows) short.
	f := newFlood(env, app, 80)
	f.pad = 6000
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	fctx, fcancel := context.WithTimeout(ctx, 8*time.Minute)
	defer fcancel()
	var rssMax int64
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		for {
			if r := brokerRSS(t); r > rssMax {
				rssMax = r
			}
			select {
			case <-stopRSS:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	took := f.run(fctx, 4, target, true)
	close(stopRSS)
	<-rssDone
	ids, statuses, samples := f.summary()
	accepted := f.bytes.Load()
	t.Logf("processor stopped: %d events (%s uncompressed) accepted in %.1fs (%.0f events/s); answers %v; broker RSS %s before, %s at most",
		len(ids), mb(accepted), took.Seconds(), float64(len(ids))/took.Seconds(), statuses, mb(rssBefore), mb(rssMax))
	if len(samples) > 0 {
		t.Errorf("not every request was 202 with the processor stopped (answers %v, after %s accepted); first: %s",
			statuses, mb(accepted), strings.Join(samples, " | "))
	}
	if l := brokerLogSince(t, logFrom); strings.Contains(l, "Usage Manager Memory Limit reached") {
		t.Errorf("the broker hit its memory limit while the backlog grew (activemq.log: Usage Manager Memory Limit reached)")
	}

	// The processor comes back and drains the backlog.
	restarted := time.Now()
	testenv.Stack(t, "start", "processor")
	cpu := drainCPU(t, ctx)
	rate := drainRate(t, ctx, env.ProcessorURL, int64(len(ids)), 8*time.Minute)
	t.Logf("drain: %d events in %.1fs after the processor started; steady %.0f events/s (10%%..90%%)",
		len(ids), time.Since(restarted).Seconds(), rate)
	cpu(int64(len(ids)))

	conn, err := pgx.Connect(ctx, env.EventsURL)
	if err != nil {
		t.Fatalf("connect events DB: %v", err)
	}
	defer conn.Close(context.Background())
	ev, err := verify.CheckEvents(ctx, conn, ids, 2*time.Minute, t.Logf)
	if err != nil {
		t.Fatalf("check events: %v", err)
	}
	if ev.Missing != 0 || ev.Duplicated != 0 || ev.Distinct != len(ids) {
		t.Errorf("accepted %d events (%d distinct): %d stored, %d missing, %d stored twice", len(ids), ev.Distinct, ev.Stored, ev.Missing, ev.Duplicated)
	}
	mismatch, err := rollupsExact(ctx, env.EventsURL)
	if err != nil {
		t.Errorf("rollups: %v", err)
	} else if len(mismatch) > 0 {
		t.Errorf("rollups differ from count(*): %v", mismatch)
	}
}

// drainRate waits until the processor has stored want events since it was
// started (processor_events_stored_total; a restart of the processor, which
// sets the counter back to 0, is added up across) and returns the steady rate
// between 10% and 90% of them, in events a second.
func drainRate(t *testing.T, ctx context.Context, url string, want int64, d time.Duration) float64 {
	t.Helper()
	type point struct {
		at time.Time
		n  int64
	}
	var pts []point
	var total, last int64
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := storedTotal(url); err == nil {
			if n < last {
				last = 0 // restarted
			}
			total += n - last
			last = n
			pts = append(pts, point{time.Now(), total})
			if total >= want {
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	lo := sort.Search(len(pts), func(i int) bool { return pts[i].n >= want/10 })
	hi := sort.Search(len(pts), func(i int) bool { return pts[i].n >= want*9/10 })
	if lo >= len(pts) || hi >= len(pts) || hi <= lo {
		t.Errorf("the backlog of %d events did not drain within %s (%d stored)", want, d, total)
		return 0
	}
	return float64(pts[hi].n-pts[lo].n) / pts[hi].at.Sub(pts[lo].at).Seconds()
}

// drainCPU samples the CPU time of the processes a drain uses (the
// processor, PostgreSQL, the broker) from /proc; the function it returns
// stops sampling and logs each one's CPU per event for n events, which,
// unlike the rate, does not depend on what else shares the machine.
func drainCPU(t *testing.T, ctx context.Context) func(n int64) {
	t.Helper()
	all, err := procstat.FromPidDir(filepath.Join(testenv.Root(t), ".run", "pid"))
	if err != nil {
		t.Logf("pid files: %v", err)
		return func(int64) {}
	}
	var procs []procstat.Proc
	for _, p := range all {
		switch p.Name {
		case "processor", "postgres", "activemq":
			procs = append(procs, p)
		}
	}
	s := procstat.StartCPU(ctx, procs)
	return func(n int64) {
		var total float64
		var parts []string
		for _, u := range s.Stop() {
			total += u.CPUSeconds
			parts = append(parts, fmt.Sprintf("%s %.1f µs (%.2f cores)", u.Name, u.CPUSeconds/float64(n)*1e6, u.Cores()))
		}
		t.Logf("drain CPU per event: %.1f µs in all (%s); two cores would drain %.0f events/s",
			total/float64(n)*1e6, strings.Join(parts, ", "), 2/(total/float64(n)))
	}
}

// storedTotal reads processor_events_stored_total from the processor.
func storedTotal(url string) (int64, error) {
	v, err := metricValue(url, "processor_events_stored_total")
	return int64(v), err
}
