package privacy_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/privacy"
	"threatview/retention/store"
)

type auditLog struct {
	mu   sync.Mutex
	recs []wire.AuditRecord
}

func (l *auditLog) Audit(_ context.Context, rec wire.AuditRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, rec)
	return nil
}

// An erasure's archive step rewrites every archived month holding the
// subject (two here), leaves the months without it alone, audits each
// removal of an old version, and waits for the retention lock.
func TestArchiveRewriter_Rewrite(t *testing.T) {
	ctx := context.Background()
	url, db := retentiontest.Postgres(t)
	fill(t, db, 3000, 20)
	src := retentiontest.EventsSource(t, url)
	st, err := store.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 100, Log: quiet}
	if sum, err := a.Run(ctx); err != nil || sum.Partitions != 6 {
		t.Fatalf("archive = %+v, %v; want the 3 finished months of events and facts", sum, err)
	}
	s := privacy.Subject{AppID: "app-1", DeviceID: "d-3"}
	var held int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2 AND received_at < $3`,
		s.AppID, s.DeviceID, retentiontest.Month(0)).Scan(&held); err != nil || held == 0 {
		t.Fatalf("subject has %d archived events (%v)", held, err)
	}
	eraseAll(t, privacy.NewPG(open(t, url)), s, 1000)

	audit := &auditLog{}
	pool := open(t, url)
	w := &privacy.ArchiveRewriter{Archiver: a, Audit: audit, Log: quiet, Rollups: privacy.NewPG(pool)}
	// The archiver or cleanup holding the retention lock: the step is
	// retried later, nothing is written.
	unlock, err := src.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Rewrite(ctx, "e-1", s); !errors.Is(err, privacy.ErrUnavailable) {
		t.Errorf("Rewrite under a held retention lock = %v, want ErrUnavailable", err)
	}
	unlock()

	rw, err := w.Rewrite(ctx, "e-1", s)
	if err != nil {
		t.Fatal(err)
	}
	removed := map[string]int64{}
	for _, r := range rw {
		removed[r.Table] += r.RowsRemoved
		m := mustMonth(t, r.Month)
		rec, err := src.Record(ctx, r.Table, m)
		if err != nil || rec.Rows != r.Rows || rec.ContentSHA256 != r.ContentSHA256 || rec.Location != r.Location {
			t.Errorf("record of %s %s = %+v (%v), rewrite %+v", r.Table, r.Month, rec, err, r)
		}
		// The archive matches its partition again (what cleanup checks).
		if n, err := src.Count(ctx, retentiontest.Find(t, src, r.Table, m)); err != nil || n != r.Rows {
			t.Errorf("%s %s has %d rows (%v), its rewritten archive %d", r.Table, r.Month, n, err, r.Rows)
		}
	}
	if removed["events.events"] != held || removed["facts.facts"] != held {
		t.Errorf("archives rewritten %+v removed %v rows, the subject had %d archived events with their facts", rw, removed, held)
	}
	if len(audit.recs) != len(rw) || len(rw) == 0 {
		t.Fatalf("%d audit records for %d rewrites", len(audit.recs), len(rw))
	}
	for i, rec := range audit.recs {
		if rec.Action != "privacy.archive.rewrite" || rec.Resource != rw[i].OldLocation || !strings.Contains(rec.ActorToken, "e-1") ||
			strings.Contains(rec.Resource, s.DeviceID) {
			t.Errorf("audit record %+v for rewrite %+v", rec, rw[i])
		}
	}
	// The months are still in the database: their facts were subtracted
	// when the events were deleted, and not a second time now.
	if bad := exact(t, pool); bad != 0 {
		t.Errorf("after the rewrite %d rollup buckets differ from count(*)", bad)
	}
	// Done: a second run finds nothing left in any archive.
	if rw, err := w.Rewrite(ctx, "e-1", s); err != nil || len(rw) != 0 {
		t.Errorf("second Rewrite = %+v, %v; want nothing", rw, err)
	}
	// The next erasure in the queue, by the same rewriter (its cache of the
	// months' subjects built before, moved with each rewrite): another
	// device's archived rows are all found.
	s2 := privacy.Subject{AppID: "app-0", DeviceID: "d-4"}
	var held2 int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2 AND received_at < $3`,
		s2.AppID, s2.DeviceID, retentiontest.Month(0)).Scan(&held2); err != nil || held2 == 0 {
		t.Fatalf("second subject has %d archived events (%v)", held2, err)
	}
	eraseAll(t, privacy.NewPG(pool), s2, 1000)
	rw2, err := w.Rewrite(ctx, "e-2", s2)
	var removed2 int64
	for _, r := range rw2 {
		if r.Table == "events.events" {
			removed2 += r.RowsRemoved
		}
	}
	if err != nil || removed2 != held2 {
		t.Errorf("Rewrite of a second subject = %+v, %v; want its %d archived events removed", rw2, err, held2)
	}
}

func mustMonth(t *testing.T, s string) (m time.Time) {
	t.Helper()
	m, err := retention.ParseMonth(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An erasure rewrites the late archives and the audit archives too (the
// directory store here; the S3 store in the store package's s3 tests).
func TestArchiveRewriter_LateAndAudit(t *testing.T) {
	st, err := store.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	retentiontest.EraseArchives(t, st)
}

// BenchmarkArchiveScan measures an erasure's archive step when the
// subject's rows are not in the archive (the common case: nothing
// written), b.N erasures in a row by one rewriter: PRIVACY_BENCH_ARCHIVED
// events (default 300,000) in one archived month, directory store. The
// first erasure reads the month and caches the subjects it holds; the
// others look them up. -benchtime=1x gives the first pass alone
// (docs/privacy.md).
func BenchmarkArchiveScan(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("PRIVACY_BENCH_ARCHIVED"))
	if n == 0 {
		n = 300000
	}
	ctx := context.Background()
	url, db := retentiontest.Postgres(b)
	month := retentiontest.Month(-2)
	retentiontest.FillPostgres(b, db, month, n)
	src := retentiontest.EventsSource(b, url)
	st, err := store.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 100000, Log: quiet, Table: "events.events"}
	if _, err := a.Run(ctx); err != nil {
		b.Fatal(err)
	}
	w := &privacy.ArchiveRewriter{Archiver: a, Log: quiet}
	busy0 := machineBusy(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if rw, err := w.Rewrite(ctx, "bench", privacy.Subject{AppID: "app-1", DeviceID: "no-such-device-" + strconv.Itoa(i)}); err != nil || len(rw) != 0 {
			b.Fatalf("Rewrite = %+v, %v", rw, err)
		}
	}
	b.StopTimer()
	b.ReportMetric((machineBusy(b)-busy0)/float64(b.N)*1000, "machine-CPU-ms/op")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "archived-rows/s")
	b.ReportMetric(load1(b), "load1")
}

// A month archived and dropped: the erasure subtracts the subject's facts
// removed from its archive from the rollups (the database no longer has
// them), so once the month is restored from the rewritten archive every
// rollup equals count(*) again, the investigation rollups included (the
// archived events' rows subtracted); the months still in the database are
// subtracted once.
func TestArchiveRewriter_DroppedMonthRollups(t *testing.T) {
	ctx := context.Background()
	url, db := retentiontest.Postgres(t)
	fill(t, db, 3000, 20)
	pool := open(t, url)
	// The events' threat types, their users and cells, and the
	// investigation rollups the processor would have written.
	if _, err := pool.Exec(ctx, `UPDATE events.events SET threat_types = facts.threat_types(payload),
		user_pseudonym = 'k1:u-' || (hashtext(id::text) & 3), lat = CASE WHEN hashtext(id::text) & 4 = 0 THEN 48.1 END, lon = 11.5`); err != nil {
		t.Fatal(err)
	}
	fillInvRollups(t, pool)
	src := retentiontest.EventsSource(t, url)
	st, err := store.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 100, Log: quiet}
	if _, err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet}
	if _, err := cl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	month := retentiontest.Month(-2)
	pg := privacy.NewPG(pool)
	if gone, err := pg.Dropped(ctx, month); err != nil || !gone {
		t.Fatalf("Dropped(%s) = %v, %v; want the month dropped", retention.MonthString(month), gone, err)
	}
	s := privacy.Subject{AppID: "app-0", DeviceID: "d-5"}
	eraseAll(t, pg, s, 1000)
	if _, err := pg.EraseDeviceDays(ctx, s); err != nil {
		t.Fatal(err)
	}
	w := &privacy.ArchiveRewriter{Archiver: a, Log: quiet, Rollups: pg}
	rw, err := w.Rewrite(ctx, "e-1", s)
	if err != nil {
		t.Fatal(err)
	}
	var adjusted int64
	for _, r := range rw {
		if r.Table == "facts.facts" && r.Month != retention.MonthString(month) && r.RollupRows != 0 {
			t.Errorf("rewrite %+v adjusted rollups of a month still in the database", r)
		}
		adjusted += r.RollupRows
	}
	if adjusted == 0 {
		t.Fatalf("rewrites %+v adjusted no rollup row for the dropped month", rw)
	}
	if _, err := a.Restore(ctx, "events.events", month); err != nil {
		t.Fatal(err)
	}
	if bad := exact(t, pool); bad != 0 {
		t.Errorf("after the erasure and the restore %d rollup buckets differ from count(*)", bad)
	}
	// The investigation counts too (before: the dropped month's erased
	// events still counted in inv_daily, inv_geo_daily, inv_threat_daily).
	// inv_daily_users is left out: a dropped month's other events are in
	// no table, so the erased device's users' days there are not rechecked
	// and stay (docs/privacy.md).
	off := invOff(t, pool)
	delete(off, "inv_daily_users")
	if len(off) != 0 {
		t.Errorf("after the erasure and the restore, investigation rows off a recount: %v", off)
	}
	// A second run finds nothing and subtracts nothing.
	if rw, err := w.Rewrite(ctx, "e-1", s); err != nil || len(rw) != 0 {
		t.Errorf("second Rewrite = %+v, %v", rw, err)
	}
	if bad := exact(t, pool); bad != 0 {
		t.Errorf("after a second run %d rollup buckets differ from count(*)", bad)
	}
	off = invOff(t, pool)
	delete(off, "inv_daily_users")
	if len(off) != 0 {
		t.Errorf("after a second run, investigation rows off a recount: %v", off)
	}
}
