package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"threatview/loadtest/verify"
	"threatview/platform/testenv"
)

// TestSweep_VerifiedAgainstTheStack runs a small sweep against the local
// stack, verifies every id it got back with a 202, and then checks that
// verify notices an accepted id that was never stored.
func TestSweep_VerifiedAgainstTheStack(t *testing.T) {
	getenv := func(k string) string { return os.Getenv(k) }
	url := testenv.MustEnv(t, "THREATVIEW_COLLECTOR_URL")
	token := testenv.MustEnv(t, "THREATVIEW_DEMO_TOKEN")
	testenv.MustEnv(t, "EVENTS_DATABASE_URL")
	testenv.MustEnv(t, "AUDIT_DATABASE_DSN")
	ctx := context.Background()
	out := t.TempDir()

	sweep := []string{"sweep", "-out", out, "-url", url, "-token", token,
		"-rates", "20,50", "-step", "1s", "-step-warmup", "500ms", "-pause", "100ms"}
	if err := run(ctx, sweep, getenv, io.Discard, io.Discard); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	var sw SweepResult
	if err := readJSON(out, "sweep.json", &sw); err != nil {
		t.Fatal(err)
	}
	if sw.Manifest == nil {
		t.Fatal("sweep.json has no manifest")
	}
	m := *sw.Manifest
	ids, err := verify.ReadIDsFile(filepath.Join(out, sweepIDsFile))
	if err != nil {
		t.Fatal(err)
	}
	// Two lead-ins and two steps at 20 and 50 req/s: about 35 + 35 requests.
	if m.Requests < 50 || m.Events != len(ids) || !m.Start.Before(m.End) {
		t.Fatalf("manifest %+v with %d ids: want the lead-ins' and steps' accepted requests, one id per event", m, len(ids))
	}

	var stderr strings.Builder
	// -rollups=false: the full comparison reads every stored event, which on
	// a long-used local stack takes minutes; the verify package tests it.
	if err := run(ctx, []string{"verify", "-of", "sweep", "-in", out, "-wait", "1m", "-rollups=false"}, getenv, io.Discard, &stderr); err != nil {
		t.Fatalf("verify -of sweep: %v\n%s", err, stderr.String())
	}
	var v VerifyResult
	if err := readJSON(out, "sweep-verify.json", &v); err != nil {
		t.Fatal(err)
	}
	if !v.OK || v.Events.Stored != len(ids) || v.Audit == nil || v.Audit.Rows != m.Requests {
		t.Fatalf("sweep-verify.json: %+v, want all %d ids stored and %d audit rows", v, len(ids), m.Requests)
	}
	if !v.RollupsSkipped || v.Rollups != nil {
		t.Errorf("-rollups=false compared the rollups: %+v", v)
	}
	md, err := os.ReadFile(filepath.Join(out, "sweep-verify.md"))
	if err != nil || !strings.Contains(string(md), "| rollup buckets differing from count(*) | — | — | not compared (`-rollups=false`) |") {
		t.Errorf("sweep-verify.md does not say the rollups were not compared (%v):\n%s", err, md)
	}
	if _, err := os.Stat(filepath.Join(out, "verify.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("verify -of sweep wrote verify.json, the run's file: %v", err)
	}

	// An id the collector never gives out (it issues version 7 ids), as if
	// it had answered 202 for an event that then vanished.
	f, err := os.OpenFile(filepath.Join(out, sweepIDsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("00000000-0000-4000-8000-00000000dead\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	sw.Manifest.Events++
	if err := writeJSON(out, "sweep.json", sw); err != nil {
		t.Fatal(err)
	}
	err = run(ctx, []string{"verify", "-of", "sweep", "-in", out, "-wait", "1s", "-no-audit", "-rollups=false"}, getenv, io.Discard, io.Discard)
	if !errors.Is(err, errVerifyFailed) || !strings.Contains(err.Error(), "1 accepted events lost") {
		t.Fatalf("verify with an id that was never stored = %v, want %v naming 1 lost event", err, errVerifyFailed)
	}
}

func TestVerify_Of(t *testing.T) {
	dir := t.TempDir()
	if err := writeJSON(dir, "sweep.json", SweepResult{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ of, want string }{
		{"sweep", "has no manifest"},
		{"run", "read run results"},
		{"plan", `want run or sweep`},
	} {
		err := run(context.Background(), []string{"verify", "-of", tc.of, "-in", dir}, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("verify -of %s = %v, want an error with %q", tc.of, err, tc.want)
		}
	}
}
