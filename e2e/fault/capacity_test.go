//go:build fault

package fault

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/mq"
)

// TestBacklogCapacity measures how large a backlog the broker holds with
// nobody consuming (issue 28: one hour of 2,000 req/s of ~1 KB events is
// 7.2 M events): a broker of the test's own with the stack's configuration
// and JVM options, its store limited to THREATVIEW_CAPACITY_STORE (default
// "10 gb", the stack's), a collector of its own in front of it, and 8
// senders posting gzip batches of 250 events of about 1 KB until
// THREATVIEW_CAPACITY_EVENTS (default 7,200,000) are accepted or the store
// refuses. It logs the events and bytes held, the store used per event and
// the broker's RSS; asserts every request 202 until the store is full, then
// a prompt 503 with Retry-After; and drains the queue, every event
// answered 202 on it exactly once.
//
// Not part of make test's fault phase (its name does not match Fault): a
// one-off measurement that queues gigabytes; make bench runs it with a
// 1 GB store (a few minutes).
func TestBacklogCapacity(t *testing.T) {
	env := e2etest.MustEnv(t)
	store := "10 gb"
	if v := os.Getenv("THREATVIEW_CAPACITY_STORE"); v != "" {
		store = v
	}
	want := envInt("THREATVIEW_CAPACITY_EVENTS", 7_200_000)
	b := startOwnBroker(t, store, "-Xms256m", "-Xmx1g") // scripts/stack.sh's ACTIVEMQ_JAVA_OPTS
	base, collectorLog := startOwnCollector(t, env, b.stompPort, true)

	app := e2etest.NewApp(t, env, "e2e-capacity")
	fenv := env
	fenv.CollectorURL = base
	f := newFlood(fenv, app, 250)
	f.pad = 720 // about 1 KB an event
	_, _, perBody, err := f.body(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	stopWatch := watchBroker(ctx, base, b.pid, time.Second)
	progress := time.NewTicker(time.Minute)
	filled := make(chan struct{})
	began := time.Now()
	go func() {
		for {
			select {
			case <-filled:
				return
			case <-progress.C:
			}
			ids, _, _ := f.summary()
			v, _ := metricValue(base, "broker_store_percent_usage")
			t.Logf("after %.0fs: %d events accepted, store %.0f%%, broker RSS %s", time.Since(began).Seconds(), len(ids), v, mb(pidRSS(b.pid)))
		}
	}()
	took := f.run(ctx, 8, int64(want)*int64(perBody)/250, true)
	progress.Stop()
	close(filled)
	storeMax, rssMax := stopWatch()
	ids, statuses, samples := f.summary()
	held := dirBytes(filepath.Join(b.dir, "data"))
	full := len(samples) > 0
	t.Logf("backlog capacity (store limit %s): %d events of %d B (%s of request bodies) accepted in %.0fs (%.0f events/s), answers %v; store on disk %s (%.0f B an event), broker_store_percent_usage %.0f%% at most; broker RSS %s at most; store full: %v",
		store, len(ids), perBody/250, mb(f.bytes.Load()), took.Seconds(), float64(len(ids))/took.Seconds(), statuses,
		mb(held), float64(held)/float64(max(1, len(ids))), storeMax, mb(rssMax), full)
	if full {
		for _, s := range samples {
			if !strings.HasPrefix(s, "503 ") || strings.Contains(s, `Retry-After=""`) {
				t.Errorf("the store filled up and a request got something other than 503 with Retry-After: %s\n%s", s, tail(collectorLog))
			}
		}
		// Full: the refusal is prompt.
		body, _, _, err := f.body(1 << 40)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		r, err := e2etest.TryDo(http.MethodPost, base+"/v1/events", app.Token, body, map[string]string{"Content-Encoding": "gzip"})
		if err != nil {
			t.Fatalf("a request to a collector whose broker store is full: %v", err)
		}
		eb := e2etest.CheckError(t, "store full", r, http.StatusServiceUnavailable)
		t.Logf("store full: 503 %s in %s, Retry-After %s", eb.Error.Code, time.Since(began).Round(time.Millisecond), r.Header.Get("Retry-After"))
	}

	// Drained exactly once.
	began = time.Now()
	onQueue := drainQueue(t, ctx, mq.Config{Addr: "127.0.0.1:" + fmt.Sprint(b.stompPort)}, "/queue/threatview.events")
	t.Logf("backlog drained from the broker: %d events in %.0fs (%.0f events/s, STOMP consumer without PostgreSQL); %d accepted",
		len(onQueue), time.Since(began).Seconds(), float64(len(onQueue))/time.Since(began).Seconds(), len(ids))
	checkQueueOnce(t, ids, onQueue, samples)
}

// pidRSS returns the resident set of process pid in bytes, 0 if unknown.
func pidRSS(pid int) int64 {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// dirBytes returns the bytes of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
