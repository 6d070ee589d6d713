package cleanupcmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	out := `{"time":"2026-12-01T06:00:00Z","level":"INFO","msg":"cleanup started","service":"cleanup","database":"events","retention_months":3}
{"time":"2026-12-01T06:00:00Z","level":"INFO","msg":"would drop partition","table":"events.events","partition":"events_y2026m01","rows":-1,"bytes":8192}
not json
`
	lines := Parse([]byte(out))
	if len(lines) != 3 || lines[1].Msg != "would drop partition" || lines[2].Msg != "not json" {
		t.Fatalf("Parse = %+v", lines)
	}
	got := ""
	for _, a := range lines[1].Attrs {
		got += a.Key + "=" + a.Value + " "
	}
	if got != "bytes=8192 partition=events_y2026m01 rows=-1 table=events.events " {
		t.Errorf("attrs = %q", got)
	}
}

func TestDryRun(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "cleanup")
	body := "#!/bin/sh\necho \"{\\\"level\\\":\\\"INFO\\\",\\\"msg\\\":\\\"args $*\\\"}\"\n[ \"$FAIL\" = 1 ] && { echo 'cleanup: boom' >&2; exit 1; }\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		r := DryRun(context.Background(), []string{script}, nil, 5*time.Second)
		if r.Err != "" || len(r.Lines) != 1 || r.Lines[0].Msg != "args --dry-run" {
			t.Fatalf("DryRun = %+v", r)
		}
	})
	t.Run("Failure", func(t *testing.T) {
		r := DryRun(context.Background(), []string{script}, []string{"FAIL=1"}, 5*time.Second)
		if !strings.Contains(r.Err, "boom") {
			t.Fatalf("DryRun failing = %+v, want the stderr", r)
		}
	})
}
