//go:build fault

package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/platform/testenv"
)

// TestFault_TrailSurvivesKillAndMariaDBRestart kills the worker with SIGKILL
// mid-batch three times and restarts MariaDB under it (run it alone: it
// restarts the shared MariaDB), then checks that every record is stored
// once, the sequence numbers run 0..n-1 with no gap and no duplicate, and
// the trail verifies against the signed checkpoints.
func TestFault_TrailSurvivesKillAndMariaDBRestart(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	queue := testenv.Queue("audit")
	bin := testenv.MustBuild(t, "./services/auditlogger/cmd/auditworker")
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	keysEnv := base64.StdEncoding.EncodeToString(seed)
	dir := t.TempDir()

	const messages, per = 120, 250
	t0 := time.Now().Add(-time.Hour)
	bodies := make([][]byte, messages)
	for i := range bodies {
		bodies[i] = batchBody(t, audittest.Records(per, t0.Add(time.Duration(i)*time.Second)))
	}
	publish(t, broker, queue, bodies...)
	total := messages * per

	env := workerEnv(dsn, broker, queue)
	env["AUDITWORKER_BATCH_MAX"] = "500"
	env["AUDITWORKER_PREFETCH"] = "4"
	env["AUDIT_SIGNING_KEYS"] = keysEnv
	env["AUDIT_TRAIL_DIR"] = dir
	env["AUDITWORKER_CHECKPOINT_EVERY"] = "200ms"
	env["LOG_LEVEL"] = "info"
	start := func() (*exec.Cmd, *testenv.SyncBuffer) {
		cmd := exec.Command(bin)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out := &testenv.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
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
		return cmd, out
	}
	rows := func() int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM audit_events").Scan(&n); err != nil {
			return -1
		}
		return n
	}

	for kill := 0; kill < 3; kill++ {
		before := rows()
		cmd, _ := start()
		waitFor(t, 60*time.Second, "rows stored", func() bool { return rows() > before })
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		t.Logf("kill %d after %d of %d records", kill+1, rows(), total)
	}
	if rows() == total {
		t.Fatal("every record was stored before the last kill; the test proves nothing")
	}
	killed := rows()
	cmd, _ := start()
	waitFor(t, 60*time.Second, "rows stored after restart", func() bool { return rows() > killed })
	testenv.Stack(t, "restart", "mariadb")
	testenv.MustPing(t, 60*time.Second, "mariadb after restart", func() error { return db.Ping() })
	waitFor(t, 180*time.Second, "all records stored", func() bool { return rows() == total })
	// A graceful stop signs the final checkpoint.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()

	var n, distinct, distinctIDs int
	var lo, hi int64
	if err := db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT seq), COUNT(DISTINCT id), MIN(seq), MAX(seq) FROM audit_events").
		Scan(&n, &distinct, &distinctIDs, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if n != total || distinct != total || distinctIDs != total || lo != 0 || hi != int64(total-1) {
		t.Fatalf("rows %d, distinct seq %d, distinct ids %d, seq %d..%d; want %d rows numbered 0..%d once each",
			n, distinct, distinctIDs, lo, hi, total, total-1)
	}
	_, keys, err := trail.ParseSigningKeys(keysEnv)
	if err != nil {
		t.Fatal(err)
	}
	src := mariadb.NewTrail(db)
	if err := src.LoadArchived(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep, err := trail.Verify(context.Background(), src, trail.StoreReference{Store: trail.Dir{Root: dir}}, keys, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Checked != int64(total) || rep.Checkpoint == nil || rep.Checkpoint.Size != uint64(total) {
		t.Fatalf("verify: ok %v, checked %d, checkpoint %+v, problems %+v", rep.OK, rep.Checked, rep.Checkpoint, rep.Problems)
	}
}
