//go:build fault

package fault

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/e2e/internal/e2etest"
	"threatview/loadtest/verify"
	"threatview/platform/testenv"
)

// TestDrainBesideLiveTraffic measures the drain of issue 28's outage as the
// issue set it up: the processor stopped while 8 senders post gzip batches
// of 250 events of about 500 B until THREATVIEW_DRAIN_EVENTS (default
// 1,000,000) are queued, then the processor started while live traffic of
// THREATVIEW_DRAIN_LIVE_RPS (default 500) single-event requests a second
// runs for the whole drain. It logs the steady drain rate, the CPU per
// drained event of the processor, PostgreSQL and the broker, and the live
// answers' p95, and asserts every request 202, every event stored exactly
// once and exact rollups. With THREATVIEW_DRAIN_PPROF set to a file name it
// saves a 30 s CPU profile of the processor taken during the drain (the
// processor must run with HTTP_PPROF=1). The backlog's ids are UUIDv7
// (time-ordered) unless THREATVIEW_DRAIN_IDS=v4.
//
// Not part of make test's fault phase (its name does not match Fault): it
// queues and drains a million events; make bench runs it (scripts/bench.sh,
// ceilings step) with a smaller backlog.
func TestDrainBesideLiveTraffic(t *testing.T) {
	env := e2etest.MustEnv(t)
	want := envInt("THREATVIEW_DRAIN_EVENTS", 1_000_000)
	rps := envInt("THREATVIEW_DRAIN_LIVE_RPS", 500)
	t.Cleanup(func() { testenv.Stack(t, "start", "processor") })
	waitAllReady(t, env, 120*time.Second)
	app := e2etest.NewApp(t, env, "e2e-drain")
	liveApp := e2etest.NewApp(t, env, "e2e-drain-live")

	testenv.Stack(t, "stop", "processor")
	f := newFlood(env, app, 250)
	// Time-ordered ids (UUIDv7, as the collector and the SDKs make them)
	// unless THREATVIEW_DRAIN_IDS=v4 (random, as some clients send).
	idKind := "v7"
	if os.Getenv("THREATVIEW_DRAIN_IDS") == "v4" {
		idKind = "v4"
	} else {
		f.newID = uuidV7
	}
	t.Logf("backlog event ids: %s", idKind)
	_, _, perBody, err := f.body(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Minute)
	took := f.run(fctx, 8, int64(want)*int64(perBody)/250, true)
	fcancel()
	ids, statuses, samples := f.summary()
	t.Logf("processor stopped: %d events of %d B accepted in %.1fs (%.0f events/s) by 8 senders; answers %v; broker RSS %s",
		len(ids), perBody/250, took.Seconds(), float64(len(ids))/took.Seconds(), statuses, mb(brokerRSS(t)))
	if len(samples) > 0 {
		t.Fatalf("not every request was 202 with the processor stopped (answers %v); first: %s", statuses, strings.Join(samples, " | "))
	}

	// Live traffic from now until the backlog is stored: single events.
	live := newFlood(env, liveApp, 1)
	lctx, lcancel := context.WithCancel(ctx)
	liveDone := make(chan struct{})
	senders := max(1, rps/10)
	go func() {
		defer close(liveDone)
		live.paced(lctx, senders, time.Duration(senders)*time.Second/time.Duration(rps))
	}()
	started := time.Now()
	testenv.Stack(t, "start", "processor")
	if out := os.Getenv("THREATVIEW_DRAIN_PPROF"); out != "" {
		go saveProfile(t, env.ProcessorURL, out)
	}
	cpu := drainCPU(t, ctx)
	rate := drainRate(t, ctx, env.ProcessorURL, int64(len(ids)), 20*time.Minute)
	drained := time.Since(started)
	lcancel()
	<-liveDone
	liveIDs, liveStatuses, liveSamples := live.summary()
	liveRate := float64(len(liveIDs)) / drained.Seconds()
	t.Logf("drain: %d events in %.1fs after the processor started; steady %.0f events/s stored (10%%..90%%), live traffic %.0f req/s beside it",
		len(ids), drained.Seconds(), rate, liveRate)
	cpu(int64(len(ids)))
	t.Logf("live traffic during the drain: %d requests, answers %v, p95 %.1f ms", len(liveIDs), liveStatuses, float64(live.p95().Microseconds())/1000)
	if len(liveSamples) > 0 {
		t.Errorf("live traffic got answers other than 202 during the drain (%v); first: %s", liveStatuses, strings.Join(liveSamples, " | "))
	}
	if p := live.p95(); p > 50*time.Millisecond {
		t.Errorf("live traffic's p95 during the drain was %s, more than 50 ms", p)
	}
	la, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load average after the drain: %s", strings.TrimSpace(string(la)))

	conn, err := pgx.Connect(ctx, env.EventsURL)
	if err != nil {
		t.Fatalf("connect events DB: %v", err)
	}
	defer conn.Close(context.Background())
	all := append(ids, liveIDs...)
	ev, err := verify.CheckEvents(ctx, conn, all, 5*time.Minute, t.Logf)
	if err != nil {
		t.Fatalf("check events: %v", err)
	}
	if ev.Missing != 0 || ev.Duplicated != 0 || ev.Distinct != len(all) {
		t.Errorf("accepted %d events (%d distinct): %d stored, %d missing, %d stored twice", len(all), ev.Distinct, ev.Stored, ev.Missing, ev.Duplicated)
	} else {
		t.Logf("exactly once: %d accepted events (backlog and live) stored once each", len(all))
	}
	mismatch, err := rollupsExact(ctx, env.EventsURL)
	if err != nil {
		t.Errorf("rollups: %v", err)
	} else if len(mismatch) > 0 {
		t.Errorf("rollups differ from count(*): %v", mismatch)
	} else {
		t.Logf("rollups exact")
	}
}

// saveProfile saves a 30 s CPU profile of the service at url to file,
// starting 5 s after the call (once a drain is under way).
func saveProfile(t *testing.T, url, file string) {
	time.Sleep(5 * time.Second)
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Get(url + "/debug/pprof/profile?seconds=30")
	if err != nil {
		t.Logf("profile: %v", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Logf("profile: %s (is HTTP_PPROF=1 set for the service?)", resp.Status)
		return
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(file, b, 0o644)
	}
	if err != nil {
		t.Logf("profile: %v", err)
	}
}

// envInt returns the positive integer in the environment variable name, or
// def.
// uuidV7 returns a time-ordered version-7 UUID (RFC 9562) for now.
func uuidV7() string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
