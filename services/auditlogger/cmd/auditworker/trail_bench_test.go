package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"threatview/auditlogger/internal/audittest"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// trailOffRev is the last build without the trail (the parent of the
// commit that added it); AUDITWORKER_BENCH_OFF_REV overrides it.
const trailOffRev = "8c59492^"

// BenchmarkWorker_TrailOnOff measures the audit worker end to end, with
// the trail and without it: the worker binary built from this tree and
// the one built from trailOffRev (git archive), each consuming the same
// number of records from a queue of its own (one record a message, as the
// collector publishes them) into a database of its own (without the
// trail's columns for the build without it), one after the other. It
// reports each build's rows/s (from the first row stored to the last), the
// worker's CPU a row (its process) and MariaDB's (its whole process: an
// upper bound), and on/off throughput in percent. AUDITWORKER_BENCH_ROWS
// sets the records a side (default 30,000).
func BenchmarkWorker_TrailOnOff(b *testing.B) {
	n := 30000
	if v, err := strconv.Atoi(os.Getenv("AUDITWORKER_BENCH_ROWS")); err == nil && v > 0 {
		n = v
	}
	rev := os.Getenv("AUDITWORKER_BENCH_OFF_REV")
	if rev == "" {
		rev = trailOffRev
	}
	broker := testenv.MustBroker(b)
	tmp := b.TempDir()
	on, off := filepath.Join(tmp, "on"), filepath.Join(tmp, "off")
	goBuild(b, ".", on)
	root := strings.TrimSpace(string(mustOutput(b, exec.Command("git", "rev-parse", "--show-toplevel"))))
	src := filepath.Join(tmp, "off-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, rev, src)
	mustOutput(b, archive)
	goBuild(b, filepath.Join(src, "services/auditlogger/cmd/auditworker"), off)

	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	var res [2]sideResult
	for b.Loop() {
		for i, side := range []string{off, on} {
			r := runSide(b, side, side == on, broker, n, base64.StdEncoding.EncodeToString(seed), tmp)
			res[i].add(r)
		}
	}
	offR, onR := res[0], res[1]
	b.ReportMetric(offR.rowsPerSec(), "off-rows/s")
	b.ReportMetric(onR.rowsPerSec(), "on-rows/s")
	b.ReportMetric(100*onR.rowsPerSec()/offR.rowsPerSec(), "on/off-%")
	b.ReportMetric(offR.workerCPU(), "off-worker-µs/row")
	b.ReportMetric(onR.workerCPU(), "on-worker-µs/row")
	b.ReportMetric(offR.dbCPU(), "off-mariadb-µs/row")
	b.ReportMetric(onR.dbCPU(), "on-mariadb-µs/row")
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average after: %s", strings.TrimSpace(string(la)))
	}
}

type sideResult struct {
	rows            int
	took            time.Duration
	worker, mariadb time.Duration
}

func (r *sideResult) add(o sideResult) {
	r.rows += o.rows
	r.took += o.took
	r.worker += o.worker
	r.mariadb += o.mariadb
}

func (r sideResult) rowsPerSec() float64 { return float64(r.rows) / r.took.Seconds() }
func (r sideResult) workerCPU() float64  { return float64(r.worker.Microseconds()) / float64(r.rows) }
func (r sideResult) dbCPU() float64      { return float64(r.mariadb.Microseconds()) / float64(r.rows) }

// runSide preloads n records into a fresh queue, starts the worker binary
// on a fresh database and measures it until every record is stored.
func runSide(b *testing.B, bin string, trail bool, broker mq.Config, n int, seed, tmp string) sideResult {
	b.Helper()
	dsn, db := audittest.MustDB(b)
	if !trail {
		// The schema as it was before the trail (migration 000003's Down).
		for _, q := range []string{"DROP TABLE audit_checkpoints", "DROP TABLE audit_tree_nodes", "DROP TABLE audit_tree",
			"ALTER TABLE audit_events DROP KEY by_seq, DROP COLUMN leaf_hash, DROP COLUMN seq"} {
			// sql: constant DDL.
			if _, err := db.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
	}
	queue := "/queue/" + testenv.Name("bench.trail")
	preload(b, broker, queue, n)
	env := workerEnv(dsn, broker, queue)
	env["AUDITWORKER_BATCH_MAX_WAIT"] = "50ms"
	if trail {
		env["AUDIT_SIGNING_KEYS"] = seed
		env["AUDIT_TRAIL_DIR"] = filepath.Join(tmp, "trail-"+queue[len("/queue/"):])
	}
	cmd := exec.Command(bin)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	var first time.Time
	var atFirst int
	var cpu0, db0 time.Duration
	deadline := time.Now().Add(10 * time.Minute)
	for {
		got := countRows(b, db)
		switch {
		case got > 0 && first.IsZero():
			first, atFirst = time.Now(), got
			cpu0, db0 = procCPU(cmd.Process.Pid), mariadbCPU()
		case got >= n:
			r := sideResult{rows: n - atFirst, took: time.Since(first),
				worker: procCPU(cmd.Process.Pid) - cpu0, mariadb: mariadbCPU() - db0}
			if r.rows <= 0 {
				b.Fatalf("the first poll found all %d rows: raise AUDITWORKER_BENCH_ROWS", n)
			}
			return r
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s stored %d of %d records in 10 minutes", bin, got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// preload publishes n records, one a message, in transactions of 500.
func preload(b *testing.B, broker mq.Config, queue string, n int) {
	b.Helper()
	p := mq.NewPublisher(broker, discard)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t0 := time.Now().Add(-time.Hour)
	for i := 0; i < n; i += 500 {
		var msgs []mq.Message
		for j := i; j < min(i+500, n); j++ {
			body, err := json.Marshal(wire.AuditBatch{V: wire.Version, Records: []wire.AuditRecord{audittest.Record(j, t0.Add(time.Duration(j)*time.Millisecond))}})
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, mq.Message{Dest: queue, Body: body})
		}
		if err := p.SendTx(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

func countRows(b *testing.B, db *sql.DB) int {
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM audit_events").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

func goBuild(b *testing.B, dir, out string) {
	b.Helper()
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	mustOutput(b, cmd)
}

func mustOutput(b *testing.B, cmd *exec.Cmd) []byte {
	b.Helper()
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr)
	}
	return out
}

// procCPU is a process's user and system CPU time.
func procCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// mariadbCPU is the CPU time of the local mariadbd processes.
func mariadbCPU() time.Duration {
	dirs, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, d := range dirs {
		comm, err := os.ReadFile("/proc/" + d.Name() + "/comm")
		if c := strings.TrimSpace(string(comm)); err != nil || (c != "mariadbd" && c != "mysqld") {
			continue
		}
		if pid, err := strconv.Atoi(d.Name()); err == nil {
			total += procCPU(pid)
		}
	}
	return total
}
