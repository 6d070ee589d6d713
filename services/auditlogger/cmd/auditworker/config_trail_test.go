package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"threatview/auditlogger/internal/audittest"
	"threatview/platform/config"
	"threatview/platform/testenv"
)

func TestConfig_CheckpointEvery(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "10s": true, "200ms": true, "11s": false, "50ms": false, "1m": false} {
		env := map[string]string{"AUDIT_DATABASE_DSN": "u:p@tcp(127.0.0.1:3306)/audit", "AUDITWORKER_CHECKPOINT_EVERY": v}
		var cfg Config
		err := config.Parse(func(k string) string { return env[k] }, &cfg)
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "AUDITWORKER_CHECKPOINT_EVERY")) {
			t.Errorf("AUDITWORKER_CHECKPOINT_EVERY=%q: Parse = %v, want ok %v", v, err, ok)
		}
	}
}

// TestRun_CheckpointStoreDown: with the trail's bucket unreachable the
// worker still stores records; each failed checkpoint and failed read is
// counted, and no checkpoint reaches the database before it left it.
func TestRun_CheckpointStoreDown(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	queue := testenv.Queue("audit")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there
	t.Setenv("AWS_ACCESS_KEY_ID", "threatview-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "threatview-test-secret")
	env := workerEnv(dsn, broker, queue)
	env["AUDIT_SIGNING_KEYS"] = base64.StdEncoding.EncodeToString(make([]byte, ed25519.SeedSize))
	env["AUDITWORKER_CHECKPOINT_EVERY"] = "200ms"
	env["ARCHIVE_S3_ENDPOINT"] = "http://" + closed
	env["ARCHIVE_S3_FORCE_PATH_STYLE"] = "true"
	env["AUDIT_TRAIL_S3_BUCKET"] = "threatview-test-audit"
	w := startWorker(t, env)
	publish(t, broker, queue, batchBody(t, audittest.Records(100, time.Now())))
	waitFor(t, 30*time.Second, "records stored and checkpoint failures counted", func() bool {
		// A worker that cannot read the bucket does not know its last
		// signed head: its first failure is a read (the list of
		// checkpoints), not a write.
		return count(t, db) == 100 && metric(t, w.ops, "auditworker_checkpoint_failures_total") >= 2 &&
			metric(t, w.ops, `auditworker_trail_store_read_failures_total{store="s3"}`) >= 2
	})
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM audit_checkpoints").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d checkpoints in the database (%v) while the bucket was unreachable, want 0", n, err)
	}
}

// TestRun_CheckpointMetricsWithoutKey: without a signing key the worker
// still exports the checkpoint metrics (a timestamp of 0), so the alert on
// checkpoints that stopped advancing fires instead of finding no series.
func TestRun_CheckpointMetricsWithoutKey(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, _ := audittest.MustDB(t)
	w := startWorker(t, workerEnv(dsn, broker, testenv.Queue("audit")))
	resp, err := http.Get(w.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, name := range []string{"auditworker_checkpoint_timestamp_seconds 0", "auditworker_checkpoint_size 0",
		"auditworker_checkpoint_failures_total 0", "auditworker_checkpoint_refusals_total 0"} {
		if !strings.Contains(string(b), "\n"+name+"\n") {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}
