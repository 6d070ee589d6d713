//go:build fault

package fault

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/e2e/internal/e2etest"
	"threatview/loadtest/verify"
	"threatview/platform/testenv"
)

// settings size the load.
type settings struct {
	rate        int           // requests a second
	load        time.Duration // load before and around the fault, at least
	faultAt     time.Duration // when the fault hits, after the load starts
	after       time.Duration // load kept up after the fault is repaired
	maxInFlight int
	long        bool
}

func settingsFromEnv() settings {
	if os.Getenv("CHAOS_LONG") == "1" {
		return settings{rate: 300, load: 30 * time.Second, faultAt: 5 * time.Second, after: 10 * time.Second, maxInFlight: 1000, long: true}
	}
	return settings{rate: 100, load: 8 * time.Second, faultAt: 2 * time.Second, after: 3 * time.Second, maxInFlight: 400}
}

// components of the stack, in the order they are brought back up.
var components = []string{"postgres", "mariadb", "activemq", "auditlogger", "auditworker", "tokens", "processor", "collector"}

// window is the moments of one fault.
type window struct {
	fault    time.Time // the moment the fault hit: the kill, or the start of a stop
	injected time.Time // the kill or stop has returned
	repaired time.Time // the start has returned
	// downFrom..downTo: the broker was stopped (ActiveMQ only).
	downFrom, downTo time.Time
}

// fault is one thing done to the stack.
type fault struct {
	name   string
	inject func(t *testing.T, w *window, probe func() outcome)
}

// crash kill -9s a service and lets the orchestrator (here the test, in
// Kubernetes the kubelet) start it again after a pause.
func crash(name string) fault {
	return fault{name: "kill -9 " + name, inject: func(t *testing.T, w *window, _ func() outcome) {
		testenv.Stack(t, "kill9", name)
		// stack.sh kill9 looks for the process's children before the
		// SIGKILL and waits for it after; the crash is at its end.
		w.injected = time.Now()
		w.fault = w.injected
		time.Sleep(1500 * time.Millisecond)
		testenv.Stack(t, "start", name)
		w.repaired = time.Now()
	}}
}

func restart(name string) fault {
	return fault{name: "restart " + name, inject: func(t *testing.T, w *window, _ func() outcome) {
		w.fault = time.Now()
		testenv.Stack(t, "restart", name)
		w.injected = time.Now()
		w.repaired = w.injected
	}}
}

// brokerOutage stops ActiveMQ, sends a few requests while it is down (none
// may be accepted), and starts it again.
func brokerOutage() fault {
	return fault{name: "restart activemq", inject: func(t *testing.T, w *window, probe func() outcome) {
		w.fault = time.Now()
		testenv.Stack(t, "stop", "activemq")
		w.injected = time.Now()
		w.downFrom = w.injected
		for i := 0; i < 5; i++ {
			o := probe()
			switch {
			case o.status == http.StatusAccepted:
				t.Errorf("request %s answered 202 while the broker was stopped", o.rid)
			case o.status != http.StatusServiceUnavailable:
				t.Errorf("request %s while the broker was stopped: status %d (%s), want 503", o.rid, o.status, o.err)
			}
		}
		w.downTo = time.Now()
		testenv.Stack(t, "start", "activemq")
		w.repaired = time.Now()
	}}
}

// row is one line of the report.
type row struct {
	fault                     string
	sent, accepted, events    int
	stored, duplicates, audit int
	extraStored, extraAudit   int
	oneOutcome
	first202, allReady, drain   float64
	rollupsExact, brokerDown503 string
}

func TestFaultSuite(t *testing.T) {
	env := e2etest.MustEnv(t)
	cfg := settingsFromEnv()
	// Whatever happens, leave every part of the stack running.
	t.Cleanup(func() {
		for _, c := range components {
			testenv.Stack(t, "start", c)
		}
	})
	waitAllReady(t, env, 120*time.Second)

	faults := []fault{
		crash("processor"),
		crash("auditworker"),
		crash("collector"),
		brokerOutage(),
		restart("postgres"),
		restart("mariadb"),
		crash("auditlogger"),
		stall("auditlogger", 10*time.Second),
		stall("activemq", 10*time.Second),
	}
	// Every fault gets its own app, created while the stack is whole.
	apps := make([]e2etest.App, len(faults))
	for i := range faults {
		apps[i] = e2etest.NewApp(t, env, "e2e-fault")
	}
	var rows []row
	for i, f := range faults {
		t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
			waitAllReady(t, env, 120*time.Second)
			rows = append(rows, runFault(t, env, cfg, f, apps[i]))
		})
	}
	report(t, cfg, rows)
}

// waitAllReady waits until every service answers /readyz with 200 and
// returns when that happened.
func waitAllReady(t *testing.T, env e2etest.Env, d time.Duration) time.Time {
	t.Helper()
	var notReady []string
	err := e2etest.WaitFor(d, func() (bool, error) {
		notReady = notReady[:0]
		for name, u := range env.ServiceURLs() {
			r, err := e2etest.TryDo(http.MethodGet, u+"/readyz", "", nil, nil)
			if err != nil || r.Status != http.StatusOK {
				notReady = append(notReady, name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		t.Fatalf("services not ready after %s: %v", d, notReady)
	}
	return time.Now()
}

func runFault(t *testing.T, env e2etest.Env, cfg settings, f fault, app e2etest.App) row {
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	rec := &recorder{}
	s, err := newSender(env, app, uint64(time.Now().UnixNano()), rec)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan int, 1)
	loadStart := time.Now()
	go func() { done <- s.run(ctx, cfg.rate, cfg.maxInFlight, stop) }()
	// Close the load whatever happens below (a failed stack command ends
	// this goroutine early).
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
		}
	}
	defer func() { stopLoad(); <-done }()

	time.Sleep(cfg.faultAt)
	w := &window{}
	f.inject(t, w, func() outcome { return s.send(ctx) })
	allReady := waitAllReady(t, env, 180*time.Second)
	// Keep the load up for the rest of its time, and for a while after the
	// repair, so recovery shows in the answers.
	end := loadStart.Add(cfg.load)
	if e := allReady.Add(cfg.after); e.After(end) {
		end = e
	}
	time.Sleep(time.Until(end))
	stopLoad()
	skipped := <-done
	done <- skipped // for the deferred receive
	loadEnd := time.Now()

	outs := rec.all()
	r := row{fault: f.name, sent: len(outs), allReady: allReady.Sub(w.fault).Seconds(), first202: -1}
	sent := map[string]bool{}       // every event id sent
	accepted := map[string]string{} // event id → request id, answered 202
	acceptedReq := map[string]bool{}
	requestOf := map[string]outcome{}
	for _, o := range outs {
		requestOf[o.rid] = o
		for _, id := range o.eventIDs {
			sent[id] = true
		}
		if o.status != http.StatusAccepted {
			continue
		}
		r.accepted++
		acceptedReq[o.rid] = true
		if len(o.ids) != len(o.eventIDs) {
			t.Errorf("request %s: 202 with %d ids for %d events", o.rid, len(o.ids), len(o.eventIDs))
		}
		for _, id := range o.ids {
			accepted[id] = o.rid
		}
		// Recovery: the first 202 to a request sent once the fault was in
		// place, counted from the moment the fault hit.
		if !o.sent.Before(w.injected) && (r.first202 < 0 || o.answered.Sub(w.fault).Seconds() < r.first202) {
			r.first202 = o.answered.Sub(w.fault).Seconds()
		}
		if !w.downFrom.IsZero() && o.sent.After(w.downFrom) && o.answered.Before(w.downTo) {
			t.Errorf("request %s answered 202 while the broker was stopped", o.rid)
		}
	}
	r.events = len(accepted)
	if !w.downFrom.IsZero() {
		r.brokerDown503 = "yes"
		if t.Failed() {
			r.brokerDown503 = "NO"
		}
	}
	if r.accepted == 0 {
		t.Fatalf("no request was accepted (%d sent)", len(outs))
	}
	statuses := map[string]int{}
	for _, o := range outs {
		k := fmt.Sprint(o.status)
		if o.status == 0 {
			k = "no answer"
		}
		statuses[k]++
	}
	t.Logf("%s: %d requests (%d ticks skipped at the in-flight cap), answers %v", f.name, len(outs), skipped, statuses)

	// Every accepted event stored exactly once; nothing foreign stored.
	pool := e2etest.Events(t, env)
	var stored map[string]int
	err = e2etest.WaitFor(180*time.Second, func() (bool, error) {
		var err error
		stored, err = e2etest.StoredCounts(ctx, pool, app.ID, since)
		if err != nil {
			return false, err
		}
		for id := range accepted {
			if stored[id] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("waiting for accepted events: %v", err)
	}
	for id, n := range stored {
		if n > 1 {
			r.duplicates += n - 1
			t.Errorf("event %s stored %d times", id, n)
		}
		switch {
		case accepted[id] != "":
			r.stored++
		case sent[id]:
			r.extraStored++ // sent, not answered 202 (503 or no answer): at least once
		default:
			t.Errorf("event %s of app %s stored but never sent", id, app.ID)
		}
	}
	for id, rid := range accepted {
		if stored[id] == 0 {
			t.Errorf("event %s (request %s) answered 202 but not stored", id, rid)
		}
	}

	// One audit row per accepted request.
	audit := e2etest.MariaDB(t, env.AuditDSN)
	var audited map[string]int
	err = e2etest.WaitFor(180*time.Second, func() (bool, error) {
		var err error
		audited, err = e2etest.AuditCounts(ctx, audit, app.ID, since)
		if err != nil {
			return false, err
		}
		for rid := range acceptedReq {
			if audited[rid] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("waiting for audit rows: %v", err)
	}
	for rid, n := range audited {
		o, known := requestOf[rid]
		switch {
		case !known:
			t.Errorf("audit row for request %s, which this test never sent", rid)
		case acceptedReq[rid]:
			r.audit += n
			if n > 1 {
				t.Errorf("request %s has %d audit rows", rid, n)
			}
		default:
			// The audit record was durable but the request was not answered
			// 202 (its events or the answer were lost): allowed, counted.
			r.extraAudit += n
			if o.status >= 400 && o.status < 500 {
				t.Errorf("request %s answered %d has a 202 audit row", rid, o.status)
			}
		}
	}
	for rid := range acceptedReq {
		if audited[rid] == 0 {
			t.Errorf("request %s answered 202 but has no audit row", rid)
		}
	}

	// One outcome per request: whatever was not a 202 kept nothing, unless
	// its outcome was unknown, and then all of it or nothing.
	r.oneOutcome = checkOneOutcome(t, ctx, pool, audit, app.ID, since, outs, 60*time.Second)

	// Rollups equal count(*) at every commit.
	mismatch, err := rollupsExact(ctx, env.EventsURL)
	switch {
	case err != nil:
		t.Errorf("rollups: %v", err)
		r.rollupsExact = "error"
	case len(mismatch) > 0:
		t.Errorf("rollups differ from count(*): %v", mismatch)
		r.rollupsExact = "NO"
	default:
		r.rollupsExact = "yes"
	}
	r.drain = time.Since(loadEnd).Seconds()
	if r.stored != r.events || r.duplicates != 0 || r.audit != r.accepted {
		t.Errorf("%s: %d events accepted, %d stored, %d duplicates; %d requests accepted, %d audit rows", f.name, r.events, r.stored, r.duplicates, r.accepted, r.audit)
	}
	return r
}

// rollupsExact compares every rollup table with count(*) over the events
// (verify.CheckRollups) inside one repeatable-read snapshot. The processor
// folds the rollups in the transaction that stores the events, so in any
// snapshot they are exact or wrong for good: there is nothing to wait for.
func rollupsExact(ctx context.Context, url string) ([]string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only
	rs, diff, err := verify.CheckRollups(ctx, tx.Conn())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rs {
		if r.Mismatched != 0 || r.Rows != r.Truth {
			out = append(out, fmt.Sprintf("%s: %d buckets differ (%d rows, %d from count(*))", r.Table, r.Mismatched, r.Rows, r.Truth))
		}
	}
	if diff != 0 {
		out = append(out, fmt.Sprintf("events and facts differ by %d rows", diff))
	}
	return out, nil
}

// report logs the table and writes it to CHAOS_REPORT when set.
func report(t *testing.T, cfg settings, rows []row) {
	var b strings.Builder
	mode := "short"
	if cfg.long {
		mode = "long"
	}
	fmt.Fprintf(&b, "Fault suite (%s): %d req/s for at least %s per fault, fault after %s; %s, %d CPUs, %s/%s\n\n",
		mode, cfg.rate, cfg.load, cfg.faultAt, time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	b.WriteString("| fault | requests sent | 202s | stored | duplicates | audit rows | stored, not 202 | audited, not 202 | unknown outcome (kept) | one-outcome violations | rollups exact | 503 while broker down | first 202 after (s) | all ready after (s) | drained after load (s) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|\n")
	for _, r := range rows {
		bd := r.brokerDown503
		if bd == "" {
			bd = "n/a"
		}
		first := fmt.Sprintf("%.1f", r.first202)
		if r.first202 < 0 {
			first = "none"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d (%d) | %d | %s | %s | %s | %.1f | %.1f |\n",
			r.fault, r.sent, r.accepted, r.stored, r.duplicates, r.audit, r.extraStored, r.extraAudit, r.unknown, r.unknownKept, r.violations, r.rollupsExact, bd, first, r.allReady, r.drain)
	}
	t.Log("\n" + b.String())
	if p := os.Getenv("CHAOS_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Errorf("write %s: %v", p, err)
		}
	}
}
