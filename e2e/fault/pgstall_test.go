//go:build fault

package fault

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/e2e/internal/e2etest"
	"threatview/loadtest/verify"
)

// TestFaultPostgresStalledThenReadOnly makes PostgreSQL stall rather than
// stop, under a modest load (issue 28, "PostgreSQL slow or full"): first a
// session holds an ACCESS EXCLUSIVE lock on events.events for 30 s, so every
// insert waits; then the database is switched read-only
// (default_transaction_read_only, and the processor's sessions ended so that
// it reconnects into it) for 20 s, so every insert fails; then back. The
// collector must answer 202 throughout, nothing may be dead-lettered, and
// afterwards every accepted event is stored exactly once.
func TestFaultPostgresStalledThenReadOnly(t *testing.T) {
	env := e2etest.MustEnv(t)
	waitAllReady(t, env, 120*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, env.EventsURL)
	if err != nil {
		t.Fatalf("connect events DB: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) }) // after the reset below
	var db string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	readOnly := func(on bool) {
		t.Helper()
		q := fmt.Sprintf(`ALTER DATABASE %s RESET default_transaction_read_only`, pgx.Identifier{db}.Sanitize())
		if on {
			q = fmt.Sprintf(`ALTER DATABASE %s SET default_transaction_read_only = on`, pgx.Identifier{db}.Sanitize())
		}
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		// Sessions read the setting when they start: end the processor's.
		if n := endProcessorSessions(t, admin); n == 0 {
			t.Logf("no processor session to end (read-only %v)", on)
		}
	}
	// Never leave the shared database read-only, whatever fails below.
	t.Cleanup(func() {
		q := fmt.Sprintf(`ALTER DATABASE %s RESET default_transaction_read_only`, pgx.Identifier{db}.Sanitize())
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	})

	app := e2etest.NewApp(t, env, "e2e-pgstall")
	dlqBefore, err := metricValue(env.ProcessorURL, "processor_messages_dead_lettered_total")
	if err != nil {
		t.Fatalf("read the processor's metrics: %v", err)
	}
	f := newFlood(env, app, 50)
	lctx, lcancel := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		f.paced(lctx, 2, 100*time.Millisecond) // about 1,000 events/s
	}()
	time.Sleep(3 * time.Second)

	// The stall: inserts wait on the lock.
	locker, err := pgx.Connect(ctx, env.EventsURL)
	if err != nil {
		t.Fatalf("connect events DB: %v", err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	if _, err := tx.Exec(ctx, `LOCK TABLE events.events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatalf("lock events.events: %v", err)
	}
	t.Logf("events.events locked after %.1fs of waiting", time.Since(locked).Seconds())
	time.Sleep(30 * time.Second)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("release the lock: %v", err)
	}
	t.Logf("events.events held ACCESS EXCLUSIVE for %.1fs", time.Since(locked).Seconds())

	// Read-only: inserts fail with SQLSTATE 25006.
	readOnly(true)
	time.Sleep(20 * time.Second)
	readOnly(false)
	time.Sleep(5 * time.Second)
	lcancel()
	<-loadDone

	ids, statuses, samples := f.summary()
	t.Logf("answers: %v (%d events accepted)", statuses, len(ids))
	if len(samples) > 0 || statuses[202] == 0 {
		t.Errorf("not every request was 202 while PostgreSQL stalled: %v; first: %s", statuses, strings.Join(samples, " | "))
	}
	storedOnceNoneDeadLettered(t, ctx, admin, env, ids, dlqBefore)
}

// endProcessorSessions terminates the PostgreSQL sessions whose client
// sockets belong to the running processor (found through /proc), and no
// one else's; it returns how many.
func endProcessorSessions(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	inodes := map[string]bool{}
	for _, pid := range processTree(t, "processor") {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			}
		}
	}
	var ports []int32
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, _ := os.ReadFile(table)
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			_, port, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(port, 16, 32); err == nil {
				ports = append(ports, int32(p))
			}
		}
	}
	var n int
	err := conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND client_port = ANY($1)`, ports).Scan(&n)
	if err != nil {
		t.Fatalf("end the processor's sessions: %v", err)
	}
	t.Logf("ended %d processor sessions", n)
	return n
}

// storedOnceNoneDeadLettered checks that every accepted id is stored
// exactly once (waiting up to 3 min) and that the processor's
// dead-letter counter has not moved from dlqBefore.
func storedOnceNoneDeadLettered(t *testing.T, ctx context.Context, conn *pgx.Conn, env e2etest.Env, ids []string, dlqBefore float64) {
	t.Helper()
	caught := time.Now()
	ev, err := verify.CheckEvents(ctx, conn, ids, 3*time.Minute, t.Logf)
	if err != nil {
		t.Fatalf("check events: %v", err)
	}
	t.Logf("every accepted event stored %.1fs after the load ended", time.Since(caught).Seconds())
	if ev.Missing != 0 || ev.Duplicated != 0 || ev.Distinct != len(ids) {
		t.Errorf("accepted %d events (%d distinct): %d stored, %d missing, %d stored twice", len(ids), ev.Distinct, ev.Stored, ev.Missing, ev.Duplicated)
	}
	dlqAfter, err := metricValue(env.ProcessorURL, "processor_messages_dead_lettered_total")
	if err != nil {
		t.Errorf("read the processor's metrics: %v", err)
	} else if dlqAfter != dlqBefore {
		t.Errorf("%v messages were dead-lettered during the fault (processor_messages_dead_lettered_total %v -> %v)", dlqAfter-dlqBefore, dlqBefore, dlqAfter)
	}
}
