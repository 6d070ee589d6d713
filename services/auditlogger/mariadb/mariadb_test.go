package mariadb_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/migrations"
	"threatview/platform/wire"
)

func TestStore_Insert(t *testing.T) {
	_, db := audittest.MustDB(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Add(-time.Hour)

	t.Run("OK dedup when delivered twice", func(t *testing.T) {
		s := mariadb.New(db)
		recs := audittest.Records(10, t0)
		n, err := s.Insert(ctx, recs)
		if err != nil || n != 10 {
			t.Fatalf("Insert = %d, %v; want 10, nil", n, err)
		}
		n, err = s.Insert(ctx, recs)
		if err != nil || n != 0 {
			t.Fatalf("second Insert = %d, %v; want 0, nil", n, err)
		}
		if rows, ids := audittest.Count(t, db); rows != 10 || ids != 10 {
			t.Fatalf("rows, ids = %d, %d; want 10, 10", rows, ids)
		}
	})

	t.Run("OK 1000 in few statements", func(t *testing.T) {
		s := mariadb.New(db)
		if _, err := s.LoadMaxPacket(ctx); err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		before := s.Statements()
		recs := audittest.Records(1000, t0.Add(time.Minute))
		n, err := s.Insert(ctx, recs)
		if err != nil || n != 1000 {
			t.Fatalf("Insert = %d, %v; want 1000, nil", n, err)
		}
		if st := s.Statements() - before; st > 2 {
			t.Fatalf("1000 records took %d INSERT statements, want at most 2", st)
		}
		var got int
		if err := db.QueryRow("SELECT COUNT(*) FROM audit_events WHERE id IN (?, ?)", mustID(recs[0].ID), mustID(recs[999].ID)).Scan(&got); err != nil || got != 2 {
			t.Fatalf("first and last record stored = %d, %v; want 2", got, err)
		}
	})

	t.Run("OK split under packet size", func(t *testing.T) {
		s := mariadb.New(db)
		s.SetMaxStatement(16 << 10)
		before := s.Statements()
		recs := audittest.Records(500, t0.Add(2*time.Minute))
		if n, err := s.Insert(ctx, recs); err != nil || n != 500 {
			t.Fatalf("Insert = %d, %v; want 500, nil", n, err)
		}
		if st := s.Statements() - before; st < 5 {
			t.Fatalf("500 records in %d statements of at most 16 KiB, want several", st)
		}
	})

	t.Run("OK awkward strings round trip", func(t *testing.T) {
		s := mariadb.New(db)
		r := audittest.Record(1, t0.Add(3*time.Minute))
		r.UserAgent = `quote ' double " back \ slash \' nul` + "\x00 tab\t end é 日本 🚀"
		r.Resource = `'); DROP TABLE audit_events; --`
		r.ActorApp = "app\\"
		r.ClientIP = "::ffff:10.1.2.3"
		r.Body = []byte("\x00\x01binary'\\")
		r.BodySHA256 = ""
		if _, err := s.Insert(ctx, []wire.AuditRecord{r}); err != nil {
			t.Fatal(err)
		}
		p, err := s.Query(ctx, auditlogger.Filter{From: r.Time, To: r.Time.Add(time.Microsecond), Limit: 10})
		if err != nil || len(p.Records) != 1 {
			t.Fatalf("Query = %d records, %v; want 1", len(p.Records), err)
		}
		got := p.Records[0]
		want := r
		want.ClientIP = "10.1.2.3"
		want.Time = want.Time.Truncate(time.Microsecond)
		// A body stored without its digest gets one: the trail's leaf covers
		// body_sha256, never the body.
		sum := sha256.Sum256(r.Body)
		want.BodySHA256 = hex.EncodeToString(sum[:])
		if got.UserAgent != want.UserAgent || got.Resource != want.Resource || got.ActorApp != want.ActorApp ||
			got.ClientIP != want.ClientIP || string(got.Body) != string(want.Body) || got.BodySHA256 != want.BodySHA256 || got.ID != want.ID || !got.Time.Equal(want.Time) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	})
}

func mustID(s string) []byte {
	id, _ := auditlogger.ParseID(s)
	return id[:]
}

func TestStore_Query(t *testing.T) {
	_, db := audittest.MustDB(t)
	ctx := context.Background()
	s := mariadb.New(db)
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	recs := audittest.Records(1200, t0)
	// Same time for a run of records so pages split inside equal times.
	for i := 100; i < 160; i++ {
		recs[i].Time = t0.Add(100 * time.Millisecond)
	}
	for i := range recs {
		if i%10 == 0 {
			recs[i].Action = "tokens.create"
		}
	}
	if _, err := s.Insert(ctx, recs); err != nil {
		t.Fatal(err)
	}
	want := func(keep func(r wire.AuditRecord) bool) []string {
		var ids []string
		sorted := slices.Clone(recs)
		slices.SortFunc(sorted, func(a, b wire.AuditRecord) int {
			if c := a.Time.Compare(b.Time); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		for _, r := range sorted {
			if keep(r) {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	from, to := t0.Add(50*time.Millisecond), t0.Add(1100*time.Millisecond)
	tests := []struct {
		name  string
		f     auditlogger.Filter
		keep  func(r wire.AuditRecord) bool
		limit int
	}{
		{"OK all", auditlogger.Filter{}, func(wire.AuditRecord) bool { return true }, 1000},
		{"OK from to", auditlogger.Filter{From: from, To: to}, func(r wire.AuditRecord) bool { return !r.Time.Before(from) && r.Time.Before(to) }, 37},
		{"OK actor", auditlogger.Filter{Actor: recs[3].ActorToken}, func(r wire.AuditRecord) bool { return r.ActorToken == recs[3].ActorToken }, 5},
		{"OK action", auditlogger.Filter{Action: "tokens.create"}, func(r wire.AuditRecord) bool { return r.Action == "tokens.create" }, 7},
		{"OK app and range", auditlogger.Filter{AppID: recs[2].ActorApp, From: from, To: to}, func(r wire.AuditRecord) bool {
			return r.ActorApp == recs[2].ActorApp && !r.Time.Before(from) && r.Time.Before(to)
		}, 13},
		{"OK nothing", auditlogger.Filter{Action: "nope"}, func(wire.AuditRecord) bool { return false }, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f
			f.Limit = tt.limit
			var got []string
			pages := 0
			for {
				p, err := s.Query(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(p.Records) > tt.limit {
					t.Fatalf("page of %d records, limit %d", len(p.Records), tt.limit)
				}
				for _, r := range p.Records {
					got = append(got, r.ID)
				}
				if p.Next == nil {
					break
				}
				f.After = p.Next
				if pages > 2000 {
					t.Fatal("paging does not end")
				}
			}
			w := want(tt.keep)
			if !slices.Equal(got, w) {
				t.Fatalf("paged %d ids in %d pages, want %d (equal: %v)", len(got), pages, len(w), slices.Equal(got, w))
			}
		})
	}
	t.Run("ErrInvalid limit", func(t *testing.T) {
		_, err := s.Query(ctx, auditlogger.Filter{Limit: auditlogger.MaxLimit + 1})
		if !errors.Is(err, auditlogger.ErrInvalid) {
			t.Fatalf("Query = %v, want ErrInvalid", err)
		}
	})
}

// TestStore_BytesPerRow measures the storage a realistic row costs (data
// plus indexes) and fails above the budget: half the reference's ~1.9 KB.
func TestStore_BytesPerRow(t *testing.T) {
	_, db := audittest.MustDB(t)
	ctx := context.Background()
	if _, err := migrations.EnsureAuditPartitions(ctx, db, time.Now(), 1); err != nil {
		t.Fatal(err)
	}
	s := mariadb.New(db)
	if _, err := s.LoadMaxPacket(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 30000
	t0 := time.Now().UTC().Truncate(time.Hour)
	for i := 0; i < n; i += 1000 {
		recs := audittest.Records(1000, t0.Add(time.Duration(i)*time.Millisecond))
		if _, err := s.Insert(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	per := bytesPerRow(t, db, n)
	t.Logf("audit_events: %.0f bytes per row (data + indexes, %d rows)", per, n)
	if per > 950 {
		t.Fatalf("%.0f bytes per row, budget 950", per)
	}
}

func bytesPerRow(tb testing.TB, db *sql.DB, n int) float64 {
	tb.Helper()
	if _, err := db.Exec("ANALYZE TABLE audit_events"); err != nil {
		tb.Fatal(err)
	}
	var total int64
	err := db.QueryRow(`SELECT COALESCE(SUM(DATA_LENGTH + INDEX_LENGTH), 0) FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'audit_events'`).Scan(&total)
	if err != nil {
		tb.Fatal(err)
	}
	return float64(total) / float64(n)
}

func TestLock(t *testing.T) {
	_, db := audittest.MustDB(t)
	ctx := context.Background()
	name, err := mariadb.LockName(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, mariadb.LockBase+".") {
		t.Fatalf("LockName = %q", name)
	}
	first, err := mariadb.Acquire(ctx, db, name, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Check(ctx); err != nil {
		t.Fatalf("Check = %v", err)
	}
	t.Run("OK second waits", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
		defer cancel()
		waited := 0
		_, err := mariadb.Acquire(wctx, db, name, time.Second, func() { waited++ })
		if err == nil || waited == 0 {
			t.Fatalf("second Acquire = %v after %d waits, want it to wait and give up", err, waited)
		}
	})
	t.Run("OK takes over after release", func(t *testing.T) {
		got := make(chan *mariadb.Lock, 1)
		go func() {
			l, err := mariadb.Acquire(ctx, db, name, time.Second, nil)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		first.Release()
		select {
		case l := <-got:
			if l == nil {
				t.Fatal("no lock")
			}
			defer l.Release()
			if err := l.Check(ctx); err != nil {
				t.Fatalf("Check = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("second did not take the lock after release")
		}
	})
}

// BenchmarkStore_Insert measures the worker's insert path: batches of 1000
// realistic records into a real MariaDB, reported as rows/s.
func BenchmarkStore_Insert(b *testing.B) {
	_, db := audittest.MustDB(b)
	ctx := context.Background()
	s := mariadb.New(db)
	if _, err := s.LoadMaxPacket(ctx); err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	t0 := time.Now().UTC()
	batches := make([][]wire.AuditRecord, b.N)
	for i := range batches {
		batches[i] = audittest.Records(batch, t0.Add(time.Duration(i)*time.Second))
	}
	b.ResetTimer()
	start := time.Now()
	cpu0, db0 := cpuTime(), mariadbCPU(b)
	for i := 0; i < b.N; i++ {
		if _, err := s.Insert(ctx, batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "rows/s")
	// CPU a row, steadier than rows/s on a shared machine: the worker's
	// side (this process) and MariaDB's (its whole process: an upper bound).
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*batch), "worker-cpu-µs/row")
	b.ReportMetric(float64((mariadbCPU(b)-db0).Microseconds())/float64(b.N*batch), "mariadb-cpu-µs/row")
	b.ReportMetric(bytesPerRow(b, db, b.N*batch), "bytes/row")
}
