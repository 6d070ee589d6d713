package threatview_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"threatview/sdk/go/threatview"
)

// TestClient_SpoolBadLine: a spool file with an unreadable line (not JSON,
// not an event line) still has every other event sent; each bad line is
// reported to OnDrop (DropSpoolError, naming the file and line) and
// counted, and nothing is left pending.
func TestClient_SpoolBadLine(t *testing.T) {
	dir := t.TempDir()
	var ids []string
	var lines []string
	for i := range 6 {
		id := uuid.Must(uuid.NewV7()).String()
		lines = append(lines, fmt.Sprintf(`1{"event_id":%q,"type":"app.startup","app":{"id":"app-1"}}`, id))
		ids = append(ids, id)
		switch i {
		case 1:
			lines = append(lines, `1{"event_id":"cut short`) // not JSON
		case 3:
			lines = append(lines, "\x00\x00garbage") // not an event line
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000007.batch"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var drops []threatview.Drop
	f, srv := newFake(t)
	c := newClient(t, threatview.Config{URL: srv.URL, SpoolDir: dir, OnDrop: func(d threatview.Drop) {
		mu.Lock()
		drops = append(drops, d)
		mu.Unlock()
	}})
	closeOK(t, c)
	stored, _ := f.snapshot()
	checkOnce(t, stored, ids)
	mu.Lock()
	defer mu.Unlock()
	if len(drops) != 2 {
		t.Fatalf("OnDrop called %d times (%+v), want twice: one per bad line", len(drops), drops)
	}
	for i, wantLine := range []string{"line 3", "line 6"} {
		d := drops[i]
		if d.Reason != threatview.DropSpoolError || d.Err == nil || !strings.Contains(d.Err.Error(), wantLine) || len(d.Events) != 0 {
			t.Errorf("drop %d = %+v (err %v), want DropSpoolError naming %s", i, d, d.Err, wantLine)
		}
	}
	if s := c.Stats(); s.Dropped != 2 || s.Delivered != 6 || s.Pending != 0 {
		t.Errorf("Stats = %+v, want 6 delivered, 2 dropped, 0 pending", s)
	}
}
