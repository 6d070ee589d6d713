package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/migrations"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func workerEnv(dsn string, broker mq.Config, queue string) map[string]string {
	return map[string]string{
		"HTTP_ADDR":                  "127.0.0.1:0",
		"STOMP_ADDR":                 broker.Addr,
		"STOMP_LOGIN":                broker.Login,
		"STOMP_PASSCODE":             broker.Passcode,
		"STOMP_HEARTBEAT":            "2s",
		"AUDIT_DATABASE_DSN":         dsn,
		"AUDITWORKER_QUEUE":          queue,
		"AUDITWORKER_BATCH_MAX_WAIT": "20ms",
		"AUDITWORKER_LOCK_TIMEOUT":   "1s",
		"LOG_LEVEL":                  "warn",
	}
}

type worker struct {
	ops    string
	cancel context.CancelFunc
	done   chan error
	out    *testenv.SyncBuffer
}

// startWorker runs the worker in process and returns once its ops server
// listens.
func startWorker(t *testing.T, env map[string]string) *worker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{cancel: cancel, done: make(chan error, 1), out: &testenv.SyncBuffer{}}
	addrc := make(chan string, 1)
	go func() {
		w.done <- runWith(ctx, func(k string) string { return env[k] }, w.out, func(a net.Addr) { addrc <- a.String() })
	}()
	select {
	case a := <-addrc:
		w.ops = "http://" + a
	case err := <-w.done:
		t.Fatalf("run = %v\n%s", err, w.out.String())
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not start")
	}
	t.Cleanup(w.stop)
	return w
}

func (w *worker) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
	w.cancel = nil
}

// metric reads one unlabelled sample from an ops server's /metrics.
func metric(t *testing.T, ops, name string) float64 {
	t.Helper()
	resp, err := http.Get(ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

func publish(t *testing.T, broker mq.Config, queue string, bodies ...[]byte) {
	t.Helper()
	p := mq.NewPublisher(broker, discard)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range bodies {
		if err := p.Send(ctx, queue, b, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func batchBody(t *testing.T, recs []wire.AuditRecord) []byte {
	t.Helper()
	b, err := json.Marshal(wire.AuditBatch{V: wire.Version, Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func count(t *testing.T, db *sql.DB) int {
	rows, ids := audittest.Count(t, db)
	if rows != ids {
		t.Fatalf("%d rows hold %d distinct ids: duplicates stored", rows, ids)
	}
	return rows
}

func TestRun_StoresOnceWhenDeliveredTwice(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	queue := testenv.Queue("audit")
	recs := audittest.Records(1000, time.Now())
	body := batchBody(t, recs)
	publish(t, broker, queue, body, body)
	w := startWorker(t, workerEnv(dsn, broker, queue))
	waitFor(t, 30*time.Second, "both messages stored", func() bool {
		return metric(t, w.ops, `auditworker_messages_total{outcome="stored"}`) == 2
	})
	if n := count(t, db); n != 1000 {
		t.Fatalf("%d rows, want 1000", n)
	}
	if d := metric(t, w.ops, "auditworker_records_duplicate_total"); d != 1000 {
		t.Fatalf("duplicates = %v, want 1000", d)
	}
	// 2,000 records (1,000 new) in few statements, not one per record.
	if st := metric(t, w.ops, "auditworker_insert_statements_total"); st < 1 || st > 4 {
		t.Fatalf("%v INSERT statements for two messages of 1,000 records, want 1 to 4", st)
	}
}

func TestRun_PoisonToDLQ(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	queue := testenv.Queue("audit")
	bad := audittest.Records(2, time.Now())
	bad[1].ClientIP = "not-an-ip"
	good := audittest.Records(3, time.Now())
	publish(t, broker, queue, []byte("not json"), batchBody(t, bad), batchBody(t, good))
	w := startWorker(t, workerEnv(dsn, broker, queue))
	// The bad record goes to the DLQ alone; its good neighbour is stored.
	waitFor(t, 30*time.Second, "good records stored", func() bool { return count(t, db) == 4 })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := mq.Subscribe(ctx, broker, wire.DeadLetter(queue), 10, discard)
	var reasons []string
	for len(reasons) < 2 {
		select {
		case d := <-sub.C():
			reasons = append(reasons, d.Header(wire.HeaderDeadLetterReason))
			_ = d.Ack()
		case <-ctx.Done():
			t.Fatalf("got %d of 2 dead letters", len(reasons))
		}
	}
	cancel()
	<-sub.Done()
	if !strings.Contains(reasons[0], "decode") || !strings.Contains(reasons[1], "client_ip") {
		t.Fatalf("dead-letter reasons = %q, want decode and client_ip", reasons)
	}
	if n := metric(t, w.ops, `auditworker_messages_total{outcome="dead_lettered"}`); n != 2 {
		t.Fatalf("dead_lettered = %v, want 2", n)
	}
}

func TestRun_SecondWorkerWaits(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	queue := testenv.Queue("audit")
	env := workerEnv(dsn, broker, queue)
	a := startWorker(t, env)
	waitFor(t, 30*time.Second, "first worker leads", func() bool { return metric(t, a.ops, "auditworker_leader") == 1 })
	envB := map[string]string{}
	for k, v := range env {
		envB[k] = v
	}
	envB["LOG_LEVEL"] = "info"
	b := startWorker(t, envB)
	waitFor(t, 30*time.Second, "second worker standing by", func() bool { return strings.Contains(b.out.String(), "standing by") })
	publish(t, broker, queue, batchBody(t, audittest.Records(5, time.Now())))
	waitFor(t, 30*time.Second, "records stored", func() bool { return count(t, db) == 5 })
	if metric(t, b.ops, "auditworker_leader") != 0 || metric(t, b.ops, `auditworker_messages_total{outcome="stored"}`) != 0 {
		t.Fatal("second worker consumed while the first held the lock")
	}
	a.stop()
	waitFor(t, 30*time.Second, "second worker takes over", func() bool { return metric(t, b.ops, "auditworker_leader") == 1 })
	publish(t, broker, queue, batchBody(t, audittest.Records(5, time.Now())))
	waitFor(t, 30*time.Second, "records stored by the second", func() bool { return count(t, db) == 10 })
}

// TestRun_KillMidBatch kills the worker process with SIGKILL while it is
// storing, restarts it, and checks every record is stored exactly once.
func TestRun_KillMidBatch(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	queue := testenv.Queue("audit")
	bin := testenv.MustBuild(t, "./services/auditlogger/cmd/auditworker")
	const messages, per = 60, 250
	bodies := make([][]byte, messages)
	t0 := time.Now()
	for i := range bodies {
		bodies[i] = batchBody(t, audittest.Records(per, t0.Add(time.Duration(i)*time.Second)))
	}
	publish(t, broker, queue, bodies...)
	env := workerEnv(dsn, broker, queue)
	env["AUDITWORKER_BATCH_MAX"] = "500"
	env["AUDITWORKER_PREFETCH"] = "4"
	env["LOG_LEVEL"] = "info"
	startProc := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "THREATVIEW_UNUSED=1")
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out testenv.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("worker output:\n%s", out.String())
			}
		})
		return cmd
	}
	first := startProc()
	total := messages * per
	waitFor(t, 60*time.Second, "first rows stored", func() bool { return count(t, db) > 0 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	killedAt := count(t, db)
	t.Logf("killed after %d of %d records", killedAt, total)
	if killedAt == total {
		t.Fatal("worker finished before the kill; the test proves nothing")
	}
	startProc()
	waitFor(t, 90*time.Second, "all records stored", func() bool { return count(t, db) == total })
	var stray int
	if err := db.QueryRow("SELECT COUNT(*) FROM audit_events WHERE time < ? OR time > ?", t0.Add(-time.Second), t0.Add(time.Duration(messages+1)*time.Second)).Scan(&stray); err != nil || stray != 0 {
		t.Fatalf("stray rows = %d, %v", stray, err)
	}
}

// TestRun_LeastPrivilege runs the worker as a user holding only INSERT and
// SELECT on audit_events (the documented grants): it stores records and
// leaves partition maintenance to the migrate command with a warning.
func TestRun_LeastPrivilege(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	user := testenv.Name("w")
	pass := testenv.Name("p")
	host := "127.0.0.1"
	stmts := []string{
		"CREATE USER '" + user + "'@'" + host + "' IDENTIFIED BY '" + pass + "'",
		"CREATE USER '" + user + "'@'localhost' IDENTIFIED BY '" + pass + "'",
	}
	// The grants of the README: append to the trail and its tree, nothing else.
	for _, g := range []string{"INSERT, SELECT ON %s.audit_events", "SELECT, UPDATE ON %s.audit_tree",
		"INSERT, SELECT ON %s.audit_tree_nodes", "INSERT, SELECT ON %s.audit_checkpoints"} {
		for _, h := range []string{host, "localhost"} {
			stmts = append(stmts, "GRANT "+fmt.Sprintf(g, cfg.DBName)+" TO '"+user+"'@'"+h+"'")
		}
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP USER IF EXISTS '" + user + "'@'" + host + "', '" + user + "'@'localhost'")
	})
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	cfg.User, cfg.Passwd = user, pass
	queue := testenv.Queue("audit")
	env := workerEnv(cfg.FormatDSN(), broker, queue)
	env["LOG_LEVEL"] = "info"
	w := startWorker(t, env)
	publish(t, broker, queue, batchBody(t, audittest.Records(20, time.Now())))
	waitFor(t, 30*time.Second, "records stored", func() bool { return count(t, db) == 20 })
	waitFor(t, 10*time.Second, "partition warning", func() bool {
		return strings.Contains(w.out.String(), "no privilege to create audit partitions")
	})
}

// TestRun_DBErrorsRetried starts the worker on a database without the
// table: inserts fail and are retried, nothing is dead-lettered, and the
// records land once the table exists.
func TestRun_DBErrorsRetried(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn := testenv.MustMariaDB(t)
	db, err := mariadb.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	queue := testenv.Queue("audit")
	publish(t, broker, queue, batchBody(t, audittest.Records(7, time.Now())))
	w := startWorker(t, workerEnv(dsn, broker, queue))
	waitFor(t, 30*time.Second, "insert errors", func() bool { return metric(t, w.ops, "auditworker_db_errors_total") >= 2 })
	if _, err := migrations.Up(context.Background(), db, migrations.Audit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "records stored after the table appeared", func() bool { return count(t, db) == 7 })
	if n := metric(t, w.ops, `auditworker_messages_total{outcome="dead_lettered"}`); n != 0 {
		t.Fatalf("dead_lettered = %v, want 0: database errors must not dead-letter", n)
	}
}
