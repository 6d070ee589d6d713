package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"threatview/platform/testenv"
	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/postgres"
	"threatview/retention/store"
)

// A real archiver process killed after its second chunk file leaves no
// manifest and no record; the next run produces exactly one correct archive.
func TestArchiver_CrashAndRerun(t *testing.T) {
	url, db := retentiontest.Postgres(t)
	month := retentiontest.Month(-2)
	retentiontest.FillPostgres(t, db, month, 50)

	bin := testenv.MustBuild(t, "./services/retention/cmd/archiver")
	dir := t.TempDir()
	vars := map[string]string{"EVENTS_DATABASE_URL": url, "AUDIT_DATABASE_DSN": "", "ARCHIVE_TARGET": "dir://" + dir,
		"ARCHIVE_CHUNK_ROWS": "10", "LOG_LEVEL": "debug"}
	// Only the test's own database: nothing inherited from the environment.
	envv := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		envv = append(envv, k+"="+v)
	}
	runBin := func(extra ...string) (string, error) {
		cmd := exec.Command(bin, "--table", "events.events", "--month", retention.MonthString(month))
		cmd.Env = append(append([]string(nil), envv...), extra...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	out, err := runBin(crashEnv + "=2")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("crashing run = %v, want killed by a signal\n%s", err, out)
	}
	ctx := context.Background()
	st, _ := store.NewDir(dir)
	prefix := retention.Prefix("events.events", month)
	keys, _ := st.List(ctx, prefix)
	if len(keys) != 2 {
		t.Errorf("after the crash the archive holds %v, want 2 chunk files", keys)
	}
	if _, _, err := retention.ReadManifest(ctx, st, prefix); !errors.Is(err, retention.ErrNotFound) {
		t.Errorf("after the crash ReadManifest = %v, want ErrNotFound", err)
	}
	src, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Record(ctx, "events.events", month); !errors.Is(err, retention.ErrNotFound) {
		t.Errorf("after the crash Record = %v, want ErrNotFound", err)
	}
	// Leave a half-written temporary file too, as a crash inside Put would.
	os.WriteFile(filepath.Join(dir, filepath.FromSlash(prefix), ".tmp-0-part-00003.ndjson.gz"), []byte("half"), 0o644)

	if out, err := runBin(); err != nil {
		t.Fatalf("re-run: %v\n%s", err, out)
	} else if !strings.Contains(out, `"msg":"summary"`) || !strings.Contains(out, `"rows":50`) {
		t.Errorf("re-run output has no summary of 50 rows:\n%s", out)
	}
	m, _, err := retention.ReadManifest(ctx, st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{prefix + retention.ManifestName}
	for _, f := range m.Files {
		want = append(want, prefix+f.Name)
	}
	sort.Strings(want)
	keys, _ = st.List(ctx, prefix)
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("archive holds %v, want exactly %v", keys, want)
	}
	p := retentiontest.Find(t, src, "events.events", month)
	n, h, err := retention.ContentHash(ctx, src, p)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := src.Record(ctx, "events.events", month)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != 50 || n != 50 || len(m.Files) != 5 || m.ContentSHA256 != h || rec.ContentSHA256 != h {
		t.Errorf("archive = %d rows in %d files %s, record %s; database %d rows %s", m.Rows, len(m.Files), m.ContentSHA256, rec.ContentSHA256, n, h)
	}

	// restore through the command: the rows are all there, so it adds none.
	var buf bytes.Buffer
	getenv := func(k string) string { return vars[k] }
	if err := run(ctx, []string{"restore", "--table", "events.events", "--month", retention.MonthString(month)}, getenv, &buf); err != nil {
		t.Fatalf("restore: %v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), `"msg":"restore verified"`) || !strings.Contains(buf.String(), `"inserted":0`) {
		t.Errorf("restore did not report a verified restore:\n%s", buf.String())
	}
}
