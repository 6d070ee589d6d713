package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// TestRun_ArchivedMonth archives and drops a month of audit rows with the
// retention jobs, then proves the whole trail from the database, the
// archive and the checkpoints; a row changed inside the archive is named.
func TestRun_ArchivedMonth(t *testing.T) {
	ctx := context.Background()
	dsn, db := audittest.MustDB(t)
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -14, 0)
	next := month.AddDate(0, 1, 0)
	if _, err := db.Exec(fmt.Sprintf("ALTER TABLE audit_events REORGANIZE PARTITION pmax INTO (PARTITION p%s VALUES LESS THAN ('%s'), PARTITION pmax VALUES LESS THAN (MAXVALUE))",
		month.Format("200601"), next.Format("2006-01-02"))); err != nil {
		t.Fatal(err)
	}
	old := audittest.Records(100, month.Add(24*time.Hour))
	recent := audittest.Records(50, now.Add(-time.Hour))
	store := mariadb.New(db)
	for _, recs := range [][]wire.AuditRecord{old, recent} {
		if _, err := store.Insert(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	signer, _, err := trail.ParseSigningKeys(base64.StdEncoding.EncodeToString(seed))
	if err != nil {
		t.Fatal(err)
	}
	trailDir, archiveDir := t.TempDir(), t.TempDir()
	if _, err := (&trail.Checkpointer{DB: mariadb.NewTrail(db), Store: trail.Dir{Root: trailDir}, Signer: signer}).Once(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}

	jobEnv := []string{"AUDIT_DATABASE_DSN=" + dsn, "EVENTS_DATABASE_URL=", "ARCHIVE_TARGET=dir://" + archiveDir,
		"CLEANUP_ENABLED=true", "CLEANUP_AUDIT_RETENTION_MONTHS=1", "LOG_LEVEL=warn"}
	for _, job := range []string{"archiver", "cleanup"} {
		cmd := exec.Command(testenv.MustBuild(t, "./services/retention/cmd/"+job))
		cmd.Env = append(os.Environ(), jobEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", job, err, out)
		}
	}
	var left int
	if err := db.QueryRow("SELECT COUNT(*) FROM audit_events").Scan(&left); err != nil || left != 50 {
		t.Fatalf("rows after cleanup = %d, %v; want 50 (the old month dropped)", left, err)
	}

	env := map[string]string{"AUDIT_DATABASE_DSN": dsn, "AUDIT_TRAIL_DIR": trailDir,
		"AUDIT_PUBLIC_KEYS": base64.StdEncoding.EncodeToString(signer.Public())}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	if err := run(ctx, getenv, &out); err != nil || !strings.Contains(out.String(), "checked 50 rows (100 archived") {
		t.Fatalf("without the archive: run = %v, output %q", err, out.String())
	}
	env["AUDITVERIFY_ARCHIVE_DIR"] = archiveDir
	out.Reset()
	if err := run(ctx, getenv, &out); err != nil || !strings.Contains(out.String(), "checked 150 rows") {
		t.Fatalf("with the archive: run = %v, output %q", err, out.String())
	}

	// An erasure rewrites an archived month as a new version under v2/ (the
	// bodies naming the erased device set to null) and removes the first
	// one: the month is read from v2/, every row still proven.
	monthDir := filepath.Join(archiveDir, "audit_events", month.Format("2006-01"))
	first, _ := filepath.Glob(filepath.Join(monthDir, "*.*"))
	if err := os.Mkdir(filepath.Join(monthDir, "v2"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range first {
		if err := os.Rename(f, filepath.Join(monthDir, "v2", filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := run(ctx, getenv, &out); err != nil || !strings.Contains(out.String(), "checked 150 rows") {
		t.Fatalf("with the month's archive under v2/: run = %v, output %q", err, out.String())
	}
	for _, f := range first {
		if err := os.Rename(filepath.Join(monthDir, "v2", filepath.Base(f)), f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(monthDir, "v2")); err != nil {
		t.Fatal(err)
	}

	// Change one archived row (its outcome) and write the file back.
	parts, _ := filepath.Glob(filepath.Join(archiveDir, "audit_events", month.Format("2006-01"), "part-*.ndjson.gz"))
	if len(parts) == 0 {
		t.Fatal("no archive part written")
	}
	body := gunzip(t, parts[0])
	id, _ := auditlogger.ParseID(old[7].ID)
	victim := base64.StdEncoding.EncodeToString(id[:])
	lines := strings.Split(string(body), "\n")
	changed := false
	for i, l := range lines {
		if strings.Contains(l, victim) {
			lines[i] = strings.Replace(l, `"outcome":"202"`, `"outcome":"200"`, 1)
			changed = lines[i] != l
		}
	}
	if !changed {
		t.Fatalf("row %s not found in the archive as expected", old[7].ID)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(strings.Join(lines, "\n")))
	zw.Close()
	if err := os.WriteFile(parts[0], gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, getenv, &out); !errors.Is(err, errProblems) || !strings.Contains(out.String(), "modified\t"+old[7].ID) {
		t.Fatalf("after changing the archive: run = %v, output %q", err, out.String())
	}
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
