package retention_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/mariadb"
	"threatview/retention/postgres"
	"threatview/retention/store"
)

// TestCleaner_CountDropRace: a row committed after cleanup checked the
// partition's count against its archive, and before the drop, must not be
// dropped unarchived: the drop recounts under the lock that drops.
func TestCleaner_CountDropRace(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		table string
		open  func(t *testing.T) (retention.Source, func(month time.Time))
	}{
		{"Postgres", "events.events", func(t *testing.T) (retention.Source, func(time.Time)) {
			url, db := retentiontest.Postgres(t)
			retentiontest.FillPostgres(t, db, retentiontest.Month(-2), 20)
			src, err := postgres.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(src.Close)
			return src, func(m time.Time) {
				if _, err := db.ExecContext(ctx, `INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country, payload)
					VALUES (gen_random_uuid(), $1::timestamptz + interval '5 days', $1, 'app.startup', 'late-app', 'ZZ', NULL)`, m); err != nil {
					t.Errorf("insert between check and drop: %v", err)
				}
			}
		}},
		{"MariaDB", mariadb.Table, func(t *testing.T) (retention.Source, func(time.Time)) {
			dsn, db := retentiontest.MariaDB(t)
			retentiontest.FillMariaDB(t, db, retentiontest.Month(-2), 20)
			src, err := mariadb.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(src.Close)
			return src, func(m time.Time) {
				if _, err := db.ExecContext(ctx, `INSERT INTO audit_events (id, time, action, outcome, event_count)
					VALUES (RANDOM_BYTES(16), ?, 'events.post', 202, 1)`, m.Add(5*24*time.Hour)); err != nil {
					t.Errorf("insert between check and drop: %v", err)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, insert := c.open(t)
			st, _ := store.NewDir(t.TempDir())
			month := retentiontest.Month(-2)
			a := &retention.Archiver{Src: src, Store: st, ChunkRows: 1000, Log: quiet, Table: c.table, Month: month}
			if sum, err := a.Run(ctx); err != nil || sum.Partitions != 1 {
				t.Fatalf("archive = %d partitions, %v; want 1", sum.Partitions, err)
			}
			p := retentiontest.Find(t, src, c.table, month)
			cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet,
				BeforeDrop: func(q retention.Partition) {
					if q.Name == p.Name {
						insert(month)
					}
				}}
			res, err := cl.Run(ctx)
			if slices.ContainsFunc(res.Dropped, func(q retention.Partition) bool { return q.Name == p.Name }) {
				t.Fatalf("cleanup dropped %s with a row committed after its count (err %v)", p.Name, err)
			}
			if !errors.Is(err, retention.ErrUnarchived) || !strings.Contains(err.Error(), p.Name) {
				t.Errorf("cleanup = %v, want ErrUnarchived naming %s", err, p.Name)
			}
			if n, err := src.Count(ctx, retentiontest.Find(t, src, c.table, month)); err != nil || n != 21 {
				t.Errorf("rows of %s after cleanup = %d, %v; want 21", p.Name, n, err)
			}
		})
	}
}
