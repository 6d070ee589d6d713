//go:build fault

package fault

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// TestFaultPostgresDownForAMinute stops PostgreSQL for a minute under load
// (issue 28, "PostgreSQL slow or full"): the collector must answer 202
// throughout (the broker buffers), and once PostgreSQL is back the
// processor, which backed off and kept its batch, must store every accepted
// event exactly once, with nothing dead-lettered for the transient error.
func TestFaultPostgresDownForAMinute(t *testing.T) {
	env := e2etest.MustEnv(t)
	down := 60 * time.Second
	// THREATVIEW_FAULT_PG_DOWN shortens or lengthens the outage.
	if v, err := time.ParseDuration(os.Getenv("THREATVIEW_FAULT_PG_DOWN")); err == nil && v > 0 {
		down = v
	}
	t.Cleanup(func() {
		testenv.Stack(t, "start", "postgres")
		testenv.Stack(t, "start", "processor")
	})
	waitAllReady(t, env, 120*time.Second)
	app := e2etest.NewApp(t, env, "e2e-pgdown")
	dlqBefore, err := metricValue(env.ProcessorURL, "processor_messages_dead_lettered_total")
	if err != nil {
		t.Fatalf("read the processor's metrics: %v", err)
	}

	// Load: two senders of 50-event batches, paced, for the whole outage
	// and a little before and after it.
	f := newFlood(env, app, 50)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lctx, lcancel := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		f.paced(lctx, 2, 40*time.Millisecond)
	}()
	time.Sleep(3 * time.Second)
	stopped := time.Now()
	testenv.Stack(t, "stop", "postgres")
	time.Sleep(down - time.Since(stopped))
	testenv.Stack(t, "start", "postgres")
	t.Logf("PostgreSQL down for %.1fs", time.Since(stopped).Seconds())
	time.Sleep(5 * time.Second)
	lcancel()
	<-loadDone

	ids, statuses, samples := f.summary()
	t.Logf("answers while PostgreSQL was down and after: %v (%d events accepted)", statuses, len(ids))
	if len(samples) > 0 || statuses[202] == 0 {
		t.Errorf("not every request was 202 while PostgreSQL was down: %v; first: %s", statuses, strings.Join(samples, " | "))
	}
	if p := f.p95(); p > 0 {
		t.Logf("p95 latency of the answers: %s", p)
	}

	conn, err := pgx.Connect(ctx, env.EventsURL)
	if err != nil {
		t.Fatalf("connect events DB: %v", err)
	}
	defer conn.Close(context.Background())
	storedOnceNoneDeadLettered(t, ctx, conn, env, ids, dlqBefore)
	mismatch, err := rollupsExact(ctx, env.EventsURL)
	if err != nil {
		t.Errorf("rollups: %v", err)
	} else if len(mismatch) > 0 {
		t.Errorf("rollups differ from count(*): %v", mismatch)
	}
}

// metricValue reads one unlabelled metric from a service's /metrics.
func metricValue(base, name string) (float64, error) {
	r, err := e2etest.TryDo(http.MethodGet, base+"/metrics", "", nil, nil)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s/metrics", name, base)
}
