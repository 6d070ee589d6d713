package privacy

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// archivedMonth is the month the test archives and drops: six months back,
// inside the processor's stored window (a year) and older than anything the
// rest of the stack's tests write.
func archivedMonth() time.Time {
	now := time.Now().UTC()
	return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -6, 0)
}

// publishOld puts n events of device of app on the processor's queue as the
// collector would have published them while month was current (or, for a
// month already archived and dropped, as a message that waited that long),
// and returns their ids.
func publishOld(ctx context.Context, t *testing.T, pub *mq.Publisher, app, device string, month time.Time, day, n int) []string {
	t.Helper()
	var b wire.EventBatch
	b.V = 1
	var ids []string
	for i := 0; i < n; i++ {
		at := month.AddDate(0, 0, day).Add(time.Duration(i*5) * time.Hour)
		id := e2etest.UUID()
		ids = append(ids, id)
		b.Events = append(b.Events, wire.Event{ID: id, Type: "app.startup", ReceivedAt: at, OccurredAt: at,
			App: wire.App{ID: app}, Device: wire.Device{ID: device, Model: fmt.Sprintf("Model %d", i%2), Manufacturer: "M", OS: "os1"},
			Country: "FR", Threats: json.RawMessage(`["root"]`)})
	}
	body, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Send(ctx, wire.EventsQueue, body, nil); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return ids
}

// retentionJob runs the archiver or cleanup command on the events DB and
// the stack's archive (the privacy service's ARCHIVE_TARGET).
func retentionJob(t *testing.T, env e2etest.Env, archiveDir, job string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testenv.MustBuild(t, "./services/retention/cmd/"+job), args...)
	// Cleanup (enabled here) keeps five months before the current one: the
	// archived month, six back, goes; an archive is required, so a month
	// without one is never dropped.
	cmd.Env = append(os.Environ(), "EVENTS_DATABASE_URL="+env.EventsURL, "AUDIT_DATABASE_DSN=", "ARCHIVE_TARGET=dir://"+archiveDir,
		"CLEANUP_ENABLED=true", "CLEANUP_EVENTS_RETENTION_MONTHS=5", "CLEANUP_REQUIRE_ARCHIVE=true", "LOG_LEVEL=warn")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// resetMonth removes what an earlier run left of month: its archive
// records and archive directories, so the processor creates the month
// again (a month with an archive record and no partition is never
// re-created), and, when no event of the month is left in the database,
// the month's rollup buckets. Without that last step the stack would keep
// counts of a month whose archive records are gone, and every later
// whole-database check that each rollup equals a count(*) over the events
// (the fault suite's) would find them.
func resetMonth(ctx context.Context, t *testing.T, pool *pgxpool.Pool, archiveDir string, month time.Time) {
	t.Helper()
	for _, q := range []string{`DELETE FROM events.archives WHERE month = $1`, `DELETE FROM events.late_archives WHERE month = $1`} {
		if _, err := pool.Exec(ctx, q, month); err != nil {
			t.Fatal(err)
		}
	}
	var left bool
	end := month.AddDate(0, 1, 0)
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events.events WHERE occurred_at >= $1 AND occurred_at < $2)`, month, end).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if !left {
		rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.columns WHERE table_schema = 'facts' AND column_name = 'bucket' AND table_name LIKE '%events_by_%'`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) == 0 {
			t.Fatal("no rollup table found in schema facts")
		}
		for _, table := range tables {
			// sql: the table name comes from information_schema (schema facts), quoted; the range is bound.
			q := fmt.Sprintf(`DELETE FROM facts.%s WHERE bucket >= $1 AND bucket < $2`, pgx.Identifier{table}.Sanitize())
			if _, err := pool.Exec(ctx, q, month, end); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, table := range []string{"events.events", "facts.facts"} {
		if err := os.RemoveAll(filepath.Join(archiveDir, table, month.Format("2006-01"))); err != nil {
			t.Fatal(err)
		}
	}
}

// archivedLines returns every row of the archives (main versions and
// supplementary ones) of table's month, parsed.
func archivedLines(t *testing.T, archiveDir, table string, month time.Time) []map[string]any {
	t.Helper()
	var out []map[string]any
	root := filepath.Join(archiveDir, table, month.Format("2006-01"))
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".ndjson.gz") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var row map[string]any
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out = append(out, row)
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// partitionExists tells whether table's partition of month exists.
func partitionExists(ctx context.Context, t *testing.T, pool *pgxpool.Pool, table string, month time.Time) bool {
	t.Helper()
	var n int
	name := fmt.Sprintf("%s_y%04dm%02d", table, month.Year(), int(month.Month()))
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestErasure_ArchivedMonth erases one device of one app whose events lie
// in a month that was archived and dropped the real way (stored by the
// processor, archived by the archiver, dropped by cleanup), with late
// events for that month held by the processor and archived by archiver
// --late, plus events of the current month posted through the collector.
// The erasure rewrites the month's events, facts and late archives: no row
// of the device is left in any of them, the other devices' archived rows
// are all there, each rewrite is audited, and the live data is erased as
// in TestErasure_RemovesOneDeviceEverywhere.
func TestErasure_ArchivedMonth(t *testing.T) {
	env := e2etest.MustEnv(t)
	privacyURL := testenv.MustEnv(t, "THREATVIEW_PRIVACY_URL")
	archiveDir := filepath.Join(testenv.Root(t), ".run", "archive")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pool := e2etest.Events(t, env)
	audit := e2etest.MariaDB(t, env.AuditDSN)
	month := archivedMonth()
	resetMonth(ctx, t, pool, archiveDir, month)
	t.Cleanup(func() { resetMonth(context.Background(), t, pool, archiveDir, month) })
	pub := mq.NewPublisher(testenv.MustBroker(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer pub.Close()

	a, b := e2etest.NewApp(t, env, "erase-arch-a"), e2etest.NewApp(t, env, "erase-arch-b")
	victim := subject{a.ID, "device-1"}
	kept := []subject{{a.ID, "device-2"}, {b.ID, "device-1"}}

	// The month, while it was current: stored by the processor.
	victimIDs := publishOld(ctx, t, pub, a.ID, victim.device, month, 2, 4)
	publishOld(ctx, t, pub, a.ID, kept[0].device, month, 3, 3)
	publishOld(ctx, t, pub, b.ID, kept[1].device, month, 4, 2)
	inMonth := func(s subject) (n int) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2 AND received_at >= $3 AND received_at < $4`,
			s.app, s.device, month, month.AddDate(0, 1, 0)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		return inMonth(victim) == 4 && inMonth(kept[0]) == 3 && inMonth(kept[1]) == 2, nil
	}); err != nil {
		t.Fatalf("old month's events not stored: %v", err)
	}

	monthCount := func(app string) (n int64) {
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(count), 0) FROM facts.events_by_country_per_month WHERE app_id = $1 AND bucket = $2`,
			app, month).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if a, b := monthCount(a.ID), monthCount(b.ID); a != 7 || b != 2 {
		t.Fatalf("the month's rollups count %d and %d events, want 7 and 2", a, b)
	}

	// Archived and dropped: the archiver, then cleanup with a retention
	// that ends just after the month.
	for _, table := range []string{"events.events", "facts.facts"} {
		if out, err := retentionJob(t, env, archiveDir, "archiver", "--table", table, "--month", month.Format("2006-01")); err != nil {
			t.Fatalf("archiver %s: %v\n%s", table, err, out)
		}
	}
	out, err := retentionJob(t, env, archiveDir, "cleanup")
	for _, table := range []string{"events.events", "facts.facts"} {
		if partitionExists(ctx, t, pool, table, month) {
			t.Fatalf("%s of %s not dropped by cleanup (%v):\n%s", table, month.Format("2006-01"), err, out)
		}
	}

	// Late events for the dropped month: held by the processor, archived
	// by archiver --late.
	lateIDs := publishOld(ctx, t, pub, a.ID, victim.device, month, 10, 2)
	publishOld(ctx, t, pub, a.ID, kept[0].device, month, 11, 1)
	if err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM events.late_events WHERE app_id = $1`, a.ID).Scan(&n)
		return n == 3, err
	}); err != nil {
		t.Fatalf("late events not held: %v", err)
	}
	if out, err := retentionJob(t, env, archiveDir, "archiver", "--late", "--table", "events.events", "--month", month.Format("2006-01")); err != nil {
		t.Fatalf("archiver --late: %v\n%s", err, out)
	}
	if ev, late := countEvents(ctx, t, pool, victim); ev != 0 || late != 0 {
		t.Fatalf("before the erasure the device has %d events and %d late events in the database; want all archived", ev, late)
	}
	// And the current month, through the collector.
	post(t, env, a, victim.device, 5)
	post(t, env, a, kept[0].device, 4)
	if err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		n, _ := countEvents(ctx, t, pool, victim)
		m, _ := countEvents(ctx, t, pool, kept[0])
		return n == 5 && m == 4, nil
	}); err != nil {
		t.Fatalf("current events not stored: %v", err)
	}

	r := e2etest.Do(t, http.MethodPost, privacyURL+"/v1/erasures", env.AdminKey, []byte(`{"app_id":"`+a.ID+`","device_id":"device-1"}`), nil)
	var e struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  string `json:"error"`
		Report struct {
			Events            int64 `json:"events_deleted"`
			ArchivesRewritten []struct {
				Table       string `json:"table"`
				Month       string `json:"month"`
				RowsRemoved int64  `json:"rows_removed"`
				Rows        int64  `json:"rows"`
				Late        bool   `json:"late"`
				OldLocation string `json:"old_location"`
			} `json:"archives_rewritten"`
			Verification *struct {
				Clean bool `json:"clean"`
			} `json:"verification"`
		} `json:"report"`
	}
	if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &e) != nil || e.ID == "" {
		t.Fatalf("POST /v1/erasures: %d %s", r.Status, r.Body)
	}
	if err := e2etest.WaitFor(2*time.Minute, func() (bool, error) {
		r := e2etest.Do(t, http.MethodGet, privacyURL+"/v1/erasures/"+e.ID, env.AdminKey, nil, nil)
		if err := json.Unmarshal(r.Body, &e); err != nil {
			return false, err
		}
		return e.Status == "done" || e.Status == "failed", nil
	}); err != nil {
		t.Fatalf("erasure not finished: %v (last %+v)", err, e)
	}
	if e.Status != "done" || e.Report.Events != 5 || e.Report.Verification == nil || !e.Report.Verification.Clean {
		t.Fatalf("erasure = %+v, want done, the 5 current events, clean", e)
	}
	removed := map[string]int64{}
	for _, rw := range e.Report.ArchivesRewritten {
		key := rw.Table
		if rw.Late {
			key += " late"
		}
		if rw.Month != month.Format("2006-01") {
			t.Errorf("rewrote %+v: only %s holds the device", rw, month.Format("2006-01"))
		}
		removed[key] += rw.RowsRemoved
	}
	if want := map[string]int64{"events.events": 4, "facts.facts": 4, "events.events late": 2}; fmt.Sprint(removed) != fmt.Sprint(want) {
		t.Fatalf("archives rewritten %+v: rows removed %v, want %v", e.Report.ArchivesRewritten, removed, want)
	}

	t.Run("nothing of the device in any archive", func(t *testing.T) {
		ids := map[string]bool{}
		for _, id := range append(victimIDs, lateIDs...) {
			ids[id] = true
		}
		for _, row := range archivedLines(t, archiveDir, "events.events", month) {
			if (row["app_id"] == victim.app && row["device_id"] == victim.device) || ids[fmt.Sprint(row["id"])] {
				t.Errorf("events archive still holds the device's row %v", row["id"])
			}
		}
		for _, row := range archivedLines(t, archiveDir, "facts.facts", month) {
			if ids[fmt.Sprint(row["event_id"])] {
				t.Errorf("facts archive still holds the fact of the device's event %v", row["event_id"])
			}
		}
	})
	t.Run("other devices' archived rows all there", func(t *testing.T) {
		got := map[subject]int{}
		for _, row := range archivedLines(t, archiveDir, "events.events", month) {
			got[subject{fmt.Sprint(row["app_id"]), fmt.Sprint(row["device_id"])}]++
		}
		if got[kept[0]] != 4 || got[kept[1]] != 2 {
			t.Errorf("archived rows of the other devices: %v, want %v: 4 (3 + 1 late), %v: 2", got, kept[0], kept[1])
		}
		var facts int
		for _, row := range archivedLines(t, archiveDir, "facts.facts", month) {
			if row["app_id"] == a.ID || row["app_id"] == b.ID {
				facts++
			}
		}
		if facts != 5 {
			t.Errorf("archived facts of the two apps: %d, want the other devices' 5", facts)
		}
	})
	t.Run("each rewrite audited", func(t *testing.T) {
		if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
			var n int
			err := audit.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE action = 'privacy.archive.rewrite' AND request_id = ?`, e.ID).Scan(&n)
			return n == len(e.Report.ArchivesRewritten), err
		}); err != nil {
			t.Errorf("privacy.archive.rewrite audit rows: %v", err)
		}
	})
	t.Run("the dropped month's rollups count the archived rows left", func(t *testing.T) {
		// The device's 4 events left the month's archive, and its counts
		// the rollups; the late events were never counted.
		if got := monthCount(a.ID); got != 3 {
			t.Errorf("app %s: the month's rollups count %d events, want 3 (the other device's)", a.ID, got)
		}
		if got := monthCount(b.ID); got != 2 {
			t.Errorf("app %s: the month's rollups count %d events, want 2 (untouched)", b.ID, got)
		}
	})
	t.Run("live data erased, rollups exact after the month", func(t *testing.T) {
		if ev, late := countEvents(ctx, t, pool, victim); ev != 0 || late != 0 {
			t.Errorf("device left: %d events, %d late events", ev, late)
		}
		if ev, _ := countEvents(ctx, t, pool, kept[0]); ev != 4 {
			t.Errorf("%v: %d events, want 4", kept[0], ev)
		}
		if err := rollupsExactSince(ctx, pool, a.ID, month.AddDate(0, 1, 0)); err != nil {
			t.Error(err)
		}
	})
}
