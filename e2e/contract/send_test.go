package contract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
	"threatview/sdk/go/threatview"
)

// TestDelivery_SendKilled runs threatview-send on an NDJSON file with a
// spool, kills it with SIGKILL once it has delivered part of the file, and
// runs it again on the same file and spool: what the first run had queued
// comes from the spool, the whole file is sent again, and every event is
// stored exactly once (the file's event ids make the re-send harmless).
func TestDelivery_SendKilled(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "sdk-send")
	bin := testenv.MustBuild(t, "./sdk/go/cmd/threatview-send")
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	file := filepath.Join(dir, "events.ndjson")
	const n = 20000
	ids := make([]string, n)
	var buf bytes.Buffer
	for i := range n {
		ids[i] = threatview.NewEventID()
		b, _ := json.Marshal(map[string]any{"type": "app.startup", "event_id": ids[i],
			"app": map[string]string{"id": app.ID}, "device": map[string]string{"model": "Pixel 8", "os": "android"},
			"attributes": map[string]int{"n": i}})
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	args := []string{"-url", env.CollectorURL, "-token", app.Token, "-spool", spool, "-batch", "100", "-progress", "50ms", file}

	// First run: killed once it has delivered something, well before the end.
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	delivered := regexp.MustCompile(`delivered (\d+),`)
	sc := bufio.NewScanner(stderr)
	killedAt := -1
	for sc.Scan() {
		if m := delivered.FindStringSubmatch(sc.Text()); m != nil {
			if d, _ := strconv.Atoi(m[1]); d > 0 {
				killedAt = d
				_ = cmd.Process.Kill()
				break
			}
		}
	}
	_ = cmd.Wait()
	if killedAt < 0 || killedAt >= n {
		t.Fatalf("threatview-send was not killed mid-way (delivered %d of %d)", killedAt, n)
	}
	left, _ := filepath.Glob(filepath.Join(spool, "*.*"))
	t.Logf("killed after %d of %d events delivered; %d spool files left", killedAt, n, len(left))

	// Second run: same file, same spool.
	out, err := exec.Command(bin, append(args[:len(args)-3:len(args)-3], "-progress", "0", file)...).CombinedOutput()
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if want := "dropped 0, invalid 0"; !bytes.Contains(out, []byte(want)) {
		t.Errorf("second run: %s", out)
	}
	storedOnce(t, env, app, since, ids)
}
