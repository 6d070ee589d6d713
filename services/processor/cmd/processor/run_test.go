package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
)

// stack is one processor's world: a fresh events DB and a fresh queue.
type stack struct {
	url    string
	pool   *pgxpool.Pool
	broker mq.Config
	queue  string
	pub    *mq.Publisher
}

func newStack(t *testing.T) *stack {
	t.Helper()
	url, pool := pgtest.MustEventsDB(t)
	s := &stack{url: url, pool: pool, broker: testenv.MustBroker(t), queue: testenv.Queue("events")}
	s.pub = mq.NewPublisher(s.broker, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { s.pub.Close() })
	return s
}

// env is the processor's environment for this stack, listening on addr.
func (s *stack) env(addr string, extra ...string) map[string]string {
	env := map[string]string{
		"EVENTS_DATABASE_URL":   s.url,
		"STOMP_ADDR":            s.broker.Addr,
		"STOMP_LOGIN":           s.broker.Login,
		"STOMP_PASSCODE":        s.broker.Passcode,
		"PROCESSOR_QUEUE":       s.queue,
		"PROCESSOR_LEADER_POLL": "100ms",
		"HTTP_ADDR":             addr,
		"LOG_LEVEL":             "debug",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// send publishes messages with n events each and returns how many events
// were sent and how many distinct ids among them. Every fifth message is
// sent twice.
func (s *stack) send(t *testing.T, r *rand.Rand, messages, n int) (events, unique int) {
	t.Helper()
	now := time.Now().UTC()
	for i := 0; i < messages; i++ {
		batch := make([]wire.Event, n)
		for j := range batch {
			batch[j] = pgtest.Event(r, now, 48*time.Hour)
		}
		body := pgtest.Body(t, batch...)
		for c := 0; c <= boolInt(i%5 == 0); c++ {
			if err := s.pub.Send(context.Background(), s.queue, body, nil); err != nil {
				t.Fatalf("send: %v", err)
			}
			events += n
		}
		unique += n
	}
	return events, unique
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// metric reads one unlabelled sample from /metrics, or -1.
func metric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

// assertExact checks events, facts and every rollup hold each event once.
func assertExact(t *testing.T, s *stack, unique int) {
	t.Helper()
	for _, table := range []string{"events.events", "facts.facts"} {
		if got := pgtest.Count(t, s.pool, "SELECT count(*) FROM "+table); got != unique {
			t.Errorf("%s holds %d rows, want %d", table, got, unique)
		}
	}
	pgtest.AssertRollupsExact(t, s.pool, unique)
}

// processorBinary builds this command once per test run.
func processorBinary(t *testing.T) string {
	t.Helper()
	return testenv.MustBuild(t, "./services/processor/cmd/processor")
}

// proc is a processor running as a child process.
type proc struct {
	cmd  *exec.Cmd
	addr string
	out  *testenv.SyncBuffer
	done chan error
}

func startProc(t *testing.T, env map[string]string) *proc {
	t.Helper()
	cmd := exec.Command(processorBinary(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{cmd: cmd, addr: env["HTTP_ADDR"], out: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start processor: %v", err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("processor output:\n%s", p.out)
		}
	})
	return p
}

// TestProcess_CrashBetweenCommitAndAck kills the processor process right
// after its first commit, before any ack; the broker redelivers the whole
// batch to the restarted process, and every count stays exact.
func TestProcess_CrashBetweenCommitAndAck(t *testing.T) {
	s := newStack(t)
	r := rand.New(rand.NewPCG(7, 7))
	events, unique := s.send(t, r, 30, 10)

	crashing := startProc(t, s.env(freeAddr(t),
		"PROCESSOR_BATCH_MAX_EVENTS", "50", crashAfterCommitEnv, "1"))
	select {
	case err := <-crashing.done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("crashing processor exited with %v, want exit status 1\n%s", err, crashing.out)
		}
		crashing.done <- err // for the cleanup
	case <-time.After(60 * time.Second):
		t.Fatalf("processor did not exit after its first commit\n%s", crashing.out)
	}
	committed := pgtest.Count(t, s.pool, "SELECT count(*) FROM events.events")
	if committed == 0 || committed >= unique {
		t.Fatalf("after the crash %d events are stored, want some but not all %d", committed, unique)
	}

	p := startProc(t, s.env(freeAddr(t)))
	// Nothing was acked before the crash, so the restarted process sees
	// every message, the crashed batch included.
	waitFor(t, 60*time.Second, "every message handled", func() bool {
		return metric(p.addr, "processor_events_stored_total")+metric(p.addr, "processor_events_duplicate_total") == float64(events)
	})
	if got := metric(p.addr, "processor_events_stored_total"); got != float64(unique-committed) {
		t.Errorf("restarted processor stored %v events, want %d", got, unique-committed)
	}
	assertExact(t, s, unique)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if err := <-p.done; err != nil {
		t.Errorf("processor after SIGTERM: %v", err)
	}
	p.done <- nil
}

// TestProcess_LeaderTakeover runs two processors on one database: the second
// waits while the first holds the lock and takes over when the first is
// killed.
func TestProcess_LeaderTakeover(t *testing.T) {
	s := newStack(t)
	r := rand.New(rand.NewPCG(8, 8))
	a := startProc(t, s.env(freeAddr(t)))
	waitFor(t, 30*time.Second, "the first processor to be ready", func() bool {
		return status("http://"+a.addr+"/readyz") == http.StatusOK
	})
	b := startProc(t, s.env(freeAddr(t)))
	waitFor(t, 30*time.Second, "the second processor to wait for the lock", func() bool {
		return strings.Contains(b.out.String(), "another processor holds the leader lock")
	})
	if got := status("http://" + b.addr + "/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("standby /readyz = %d, want 503", got)
	}
	if got := metric(b.addr, "processor_leader"); got != 0 {
		t.Fatalf("standby processor_leader = %v, want 0", got)
	}
	events, unique := s.send(t, r, 5, 4)
	waitFor(t, 30*time.Second, "the leader to store the first messages", func() bool {
		return metric(a.addr, "processor_events_stored_total")+metric(a.addr, "processor_events_duplicate_total") == float64(events)
	})

	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	waitFor(t, 30*time.Second, "the second processor to take over", func() bool {
		return status("http://"+b.addr+"/readyz") == http.StatusOK
	})
	events2, unique2 := s.send(t, r, 5, 4)
	waitFor(t, 30*time.Second, "the new leader to store the next messages", func() bool {
		return metric(b.addr, "processor_events_stored_total")+metric(b.addr, "processor_events_duplicate_total") == float64(events2)
	})
	assertExact(t, s, unique+unique2)
}

// TestRun covers the in-process service: ops endpoints, a stored message,
// and a clean return on cancellation.
func TestRun(t *testing.T) {
	s := newStack(t)
	addr := freeAddr(t)
	env := s.env(addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var out testenv.SyncBuffer
	go func() { done <- run(ctx, func(k string) string { return env[k] }, &out) }()
	waitFor(t, 30*time.Second, "/readyz", func() bool { return status("http://"+addr+"/readyz") == http.StatusOK })
	if got := status("http://" + addr + "/healthz"); got != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", got)
	}
	if got := status("http://" + addr + "/nope"); got != http.StatusNotFound {
		t.Errorf("/nope = %d, want 404", got)
	}
	_, unique := s.send(t, rand.New(rand.NewPCG(9, 9)), 3, 5)
	waitFor(t, 30*time.Second, "events and rollups", func() bool {
		return pgtest.Count(t, s.pool, "SELECT count(*) FROM events.events") == unique
	})
	assertExact(t, s, unique)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestRun_Config(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"MissingDatabase", map[string]string{}, "EVENTS_DATABASE_URL"},
		{"BadBatch", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y", "PROCESSOR_BATCH_MAX_EVENTS": "0"}, "PROCESSOR_BATCH_MAX_EVENTS"},
		{"BadWait", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y", "PROCESSOR_BATCH_MAX_WAIT": "soon"}, "PROCESSOR_BATCH_MAX_WAIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), func(k string) string { return tc.env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestProcess_TwoShards runs two processors, one per shard queue, on one
// events DB: each leads its own queue (their leader locks differ). Every
// event goes to shard 0 and a client re-send of it (the same id and app, a
// later received_at) to shard 1 at the same time, so the two writers meet
// the same ids all along; one processor is killed (SIGKILL) mid-way and
// started again. Each id is stored once, and every rollup is exact.
func TestProcess_TwoShards(t *testing.T) {
	s := newStack(t)
	queues := [2]string{testenv.Queue("events-0"), testenv.Queue("events-1")}
	env := func(k int) map[string]string {
		return s.env(freeAddr(t), "PROCESSOR_QUEUE", queues[k], "PROCESSOR_BATCH_MAX_WAIT", "20ms")
	}
	procs := [2]*proc{startProc(t, env(0)), startProc(t, env(1))}
	for _, p := range procs {
		waitFor(t, 30*time.Second, "both shards' processors ready", func() bool {
			return status("http://"+p.addr+"/readyz") == http.StatusOK
		})
	}
	r := rand.New(rand.NewPCG(10, 10))
	now := time.Now().UTC()
	const messages, perMessage = 60, 25
	for i := range messages {
		first := make([]wire.Event, perMessage)
		again := make([]wire.Event, perMessage)
		for j := range first {
			first[j] = pgtest.Event(r, now, 2*time.Hour)
			again[j] = first[j]
			again[j].ReceivedAt = first[j].ReceivedAt.Add(time.Duration(1+r.IntN(5000)) * time.Millisecond)
		}
		for k, batch := range [2][]wire.Event{first, again} {
			if err := s.pub.Send(context.Background(), queues[k], pgtest.Body(t, batch...), nil); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		if i == messages/2 {
			if err := procs[1].cmd.Process.Kill(); err != nil {
				t.Fatalf("kill shard 1's processor: %v", err)
			}
			err := <-procs[1].done
			procs[1].done <- err // for its cleanup
			procs[1] = startProc(t, env(1))
		}
	}
	unique := messages * perMessage
	waitFor(t, 90*time.Second, "every event stored once", func() bool {
		return pgtest.Count(t, s.pool, "SELECT count(*) FROM events.events") >= unique &&
			metric(procs[1].addr, "processor_events_stored_total")+metric(procs[1].addr, "processor_events_duplicate_total") > 0
	})
	// Whatever is still queued for shard 1 holds only re-sends: give it
	// the time to arrive and be skipped, then check nothing was doubled.
	time.Sleep(2 * time.Second)
	if n := pgtest.Count(t, s.pool, "SELECT count(*) - count(DISTINCT (id, app_id)) FROM events.events"); n != 0 {
		t.Fatalf("%d ids stored twice by the two shards' processors", n)
	}
	assertExact(t, s, unique)
}
