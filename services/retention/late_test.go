package retention_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/postgres"
	"threatview/retention/store"
)

// TestArchiver_LateEvents: an event for a month that was archived and
// dropped never re-creates the month; it is held, archived beside the
// verified archive (which stays untouched), and restored with it. --force
// writes a new version beside the verified archive, never over it.
func TestArchiver_LateEvents(t *testing.T) {
	ctx := context.Background()
	url, db := retentiontest.Postgres(t)
	month := retentiontest.Month(-2)
	retentiontest.FillPostgres(t, db, month, 40)
	src, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	st, _ := store.NewDir(t.TempDir())
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 16, Log: quiet}
	if _, err := a.Run(ctx); err != nil {
		t.Fatalf("archive: %v", err)
	}
	rec, err := src.Record(ctx, "events.events", month)
	if err != nil {
		t.Fatal(err)
	}
	verified := snapshot(t, st, retention.Prefix("events.events", month))

	t.Run("ForceWritesBeside", func(t *testing.T) {
		// A month still present: --force archives it again as a new version
		// and leaves the verified one in place.
		a := &retention.Archiver{Src: src, Store: st, ChunkRows: 16, Log: quiet, Table: "events.events", Month: month, Force: true}
		if sum, err := a.Run(ctx); err != nil || sum.Partitions != 1 {
			t.Fatalf("forced archive = %d partitions, %v", sum.Partitions, err)
		}
		now := snapshot(t, st, retention.Prefix("events.events", month))
		for k, v := range verified {
			if now[k] != v {
				t.Errorf("forced archive changed or deleted %s", k)
			}
		}
		if len(now) <= len(verified) {
			t.Errorf("forced archive wrote nothing beside the verified one: %d objects, had %d", len(now), len(verified))
		}
		rec2, err := src.Record(ctx, "events.events", month)
		if err != nil || rec2.ManifestSHA256 == rec.ManifestSHA256 || rec2.Rows != rec.Rows {
			t.Errorf("record after --force = %+v, %v; want the new version's, same rows", rec2, err)
		}
		verified = now
	})

	cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet}
	if _, err := cl.Run(ctx); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	partName := pgName("events.events", month)
	if slices.Contains(retentiontest.Names(t, src, "events.events"), partName) {
		t.Fatalf("%s not dropped", partName)
	}

	// Partition maintenance (what the processor calls on a missing partition)
	// must not bring the dropped month back.
	if _, err := db.ExecContext(ctx, "SELECT events.ensure_monthly_partitions('events.events', $1, 1)", month); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(retentiontest.Names(t, src, "events.events"), partName) {
		t.Fatalf("ensure_monthly_partitions re-created the dropped %s", partName)
	}
	if !slices.Contains(retentiontest.Names(t, src, "events.events"), pgName("events.events", month.AddDate(0, 1, 0))) {
		t.Fatalf("ensure_monthly_partitions lost the month after")
	}

	// The processor holds the late event (its own test covers that step).
	lateID := "0192a0c4-0000-7000-8000-00000000beef"
	if _, err := db.ExecContext(ctx, `INSERT INTO events.late_events (id, received_at, occurred_at, type, app_id, country, payload, reason)
		VALUES ($1, $2::timestamptz + interval '3 days', $2, 'app.startup', 'late-app', 'ZZ', '{"n": 1}', 'month archived and dropped')`,
		lateID, month); err != nil {
		t.Fatalf("hold a late event: %v", err)
	}

	late := &retention.Archiver{Src: src, Store: st, ChunkRows: 16, Log: quiet, Late: true}
	sum, err := late.Run(ctx)
	if err != nil || sum.Partitions != 1 || sum.Rows != 1 {
		t.Fatalf("archiver --late = %+v, %v; want 1 archive of 1 row", sum, err)
	}
	now := snapshot(t, st, retention.Prefix("events.events", month))
	for k, v := range verified {
		if now[k] != v {
			t.Errorf("archiver --late changed or deleted %s", k)
		}
	}
	var supplementary []string
	for k := range now {
		if _, ok := verified[k]; !ok {
			supplementary = append(supplementary, k)
		}
	}
	if len(supplementary) < 2 || !slices.ContainsFunc(supplementary, func(k string) bool {
		return strings.Contains(k, "/late-") && strings.HasSuffix(k, retention.ManifestName)
	}) {
		t.Errorf("supplementary archive = %v, want a late-* directory with a manifest", supplementary)
	}
	var held int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM events.late_events").Scan(&held); err != nil || held != 0 {
		t.Errorf("held events after archiver --late = %d, %v; want 0", held, err)
	}
	if slices.Contains(retentiontest.Names(t, src, "events.events"), partName) {
		t.Fatalf("archiver --late re-created %s", partName)
	}
	// Nothing left to do: a second run archives nothing.
	if sum, err := late.Run(ctx); err != nil || sum.Partitions != 0 {
		t.Errorf("second archiver --late = %+v, %v; want nothing", sum, err)
	}

	// Restore brings back the verified rows and the late one.
	if _, err := a.Restore(ctx, "events.events", month); err != nil {
		t.Fatalf("restore: %v", err)
	}
	var n int
	var lateApp sql.NullString
	if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*), max(app_id) FILTER (WHERE id = '%s') FROM events.%s", lateID, partName)).Scan(&n, &lateApp); err != nil {
		t.Fatal(err)
	}
	if n != 41 || lateApp.String != "late-app" {
		t.Errorf("restored %s: %d rows, late event app %q; want 41 with late-app", partName, n, lateApp.String)
	}
}

// snapshot maps every object key under prefix to its content.
func snapshot(t *testing.T, st retention.Store, prefix string) map[string]string {
	t.Helper()
	keys, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		r, err := st.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		r.Close()
		out[k] = b.String()
	}
	return out
}
