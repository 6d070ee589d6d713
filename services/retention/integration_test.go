package retention_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"threatview/migrations"
	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/mariadb"
	"threatview/retention/postgres"
	"threatview/retention/store"
)

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

func pgName(table string, m time.Time) string {
	_, rel, _ := strings.Cut(table, ".")
	return fmt.Sprintf("%s_y%04dm%02d", rel, m.Year(), int(m.Month()))
}

func names(table string, months ...int) []string {
	var out []string
	for _, i := range months {
		m := retentiontest.Month(i)
		if table == mariadb.Table {
			out = append(out, migrations.AuditPartitionName(m))
		} else {
			out = append(out, pgName(table, m))
		}
	}
	return out
}

type dbCase struct {
	name   string
	tables []string
	open   func(t *testing.T) retention.Source
	// after setup the partitions are months -3 .. last (inclusive)
	last int
}

func cases() []dbCase {
	return []dbCase{
		{
			name: "Postgres", tables: postgres.Tables, last: 3,
			open: func(t *testing.T) retention.Source {
				url, db := retentiontest.Postgres(t)
				for _, i := range []int{-2, -1, 0} {
					retentiontest.FillPostgres(t, db, retentiontest.Month(i), 40)
				}
				src, err := postgres.Open(context.Background(), url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(src.Close)
				return src
			},
		},
		{
			name: "MariaDB", tables: []string{mariadb.Table}, last: 1,
			open: func(t *testing.T) retention.Source {
				dsn, db := retentiontest.MariaDB(t)
				for _, i := range []int{-2, -1, 0} {
					retentiontest.FillMariaDB(t, db, retentiontest.Month(i), 30)
				}
				src, err := mariadb.Open(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(src.Close)
				return src
			},
		},
	}
}

func span(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// With retention 1 month and rows in three months, cleanup drops exactly the
// partitions two and three months back, refuses everything without an
// archive when one is required, and a dry run drops nothing.
func TestCleaner_Retention(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			src := c.open(t)
			all := map[string][]string{}
			for _, table := range c.tables {
				all[table] = names(table, span(-3, c.last)...)
				if got := retentiontest.Names(t, src, table); !reflect.DeepEqual(got, all[table]) {
					t.Fatalf("partitions of %s = %v, want %v", table, got, all[table])
				}
			}
			unchanged := func(t *testing.T) {
				t.Helper()
				for _, table := range c.tables {
					if got := retentiontest.Names(t, src, table); !reflect.DeepEqual(got, all[table]) {
						t.Errorf("partitions of %s = %v, want all of %v", table, got, all[table])
					}
				}
			}

			t.Run("ErrUnarchived", func(t *testing.T) {
				cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Log: quiet}
				res, err := cl.Run(ctx)
				if !errors.Is(err, retention.ErrUnarchived) {
					t.Fatalf("Run = %v, want ErrUnarchived", err)
				}
				for _, table := range c.tables {
					for _, n := range names(table, -3, -2) {
						if !strings.Contains(err.Error(), n) {
							t.Errorf("error %q does not name %s", err, n)
						}
					}
				}
				if len(res.Dropped) != 0 {
					t.Errorf("dropped %v, want none", res.Dropped)
				}
				unchanged(t)
			})
			t.Run("DryRun", func(t *testing.T) {
				cl := &retention.Cleaner{Src: src, Months: 1, DryRun: true, Log: quiet}
				res, err := cl.Run(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Dropped) != 2*len(c.tables) {
					t.Errorf("dry run would drop %d partitions, want %d", len(res.Dropped), 2*len(c.tables))
				}
				unchanged(t)
			})
			t.Run("OK", func(t *testing.T) {
				keep := map[string]int64{}
				for _, table := range c.tables {
					for _, i := range []int{-1, 0} {
						n, err := src.Count(ctx, retentiontest.Find(t, src, table, retentiontest.Month(i)))
						if err != nil {
							t.Fatal(err)
						}
						keep[table+retention.MonthString(retentiontest.Month(i))] = n
					}
				}
				cl := &retention.Cleaner{Src: src, Months: 1, Log: quiet}
				res, err := cl.Run(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Dropped) != 2*len(c.tables) {
					t.Errorf("dropped %d partitions, want %d", len(res.Dropped), 2*len(c.tables))
				}
				for _, table := range c.tables {
					want := names(table, span(-1, c.last)...)
					if got := retentiontest.Names(t, src, table); !reflect.DeepEqual(got, want) {
						t.Errorf("partitions of %s after cleanup = %v, want %v", table, got, want)
					}
					for _, i := range []int{-1, 0} {
						n, err := src.Count(ctx, retentiontest.Find(t, src, table, retentiontest.Month(i)))
						if err != nil {
							t.Fatal(err)
						}
						if k := table + retention.MonthString(retentiontest.Month(i)); n != keep[k] || n == 0 {
							t.Errorf("%s has %d rows after cleanup, want %d", k, n, keep[k])
						}
					}
				}
				// A second run finds nothing more to drop.
				res, err = cl.Run(ctx)
				if err != nil || len(res.Dropped) != 0 {
					t.Errorf("second Run = %v, %v; want nothing dropped", res.Dropped, err)
				}
			})
		})
	}
}

// Archive → verify → cleanup → restore gives back the same rows, checked by
// count and content hash; both archive and restore are safe to repeat.
func TestArchiver_RoundTrip(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			src := c.open(t)
			dir := t.TempDir()
			st, err := store.NewDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			type hashed struct {
				rows int64
				sum  string
			}
			before := map[string]hashed{}
			for _, table := range c.tables {
				n, h, err := retention.ContentHash(ctx, src, retentiontest.Find(t, src, table, retentiontest.Month(-2)))
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					t.Fatalf("%s has no rows two months back", table)
				}
				before[table] = hashed{n, h}
			}

			a := &retention.Archiver{Src: src, Store: st, ChunkRows: 7, Log: quiet}
			sum, err := a.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Months -3, -2, -1 are finished; the current one is not.
			if want := 3 * len(c.tables); sum.Partitions != want {
				t.Errorf("archived %d partitions, want %d", sum.Partitions, want)
			}
			for _, table := range c.tables {
				rec, err := src.Record(ctx, table, retentiontest.Month(-2))
				if err != nil {
					t.Fatal(err)
				}
				if rec.Rows != before[table].rows || rec.ContentSHA256 != before[table].sum || rec.VerifiedAt.IsZero() {
					t.Errorf("record of %s = %d rows %s, want %d rows %s, verified", table, rec.Rows, rec.ContentSHA256, before[table].rows, before[table].sum)
				}
				if _, err := src.Record(ctx, table, retentiontest.Month(0)); !errors.Is(err, retention.ErrNotFound) {
					t.Errorf("current month of %s has an archive record (%v), want none", table, err)
				}
				m, _, err := retention.ReadManifest(ctx, st, retention.Prefix(table, retentiontest.Month(-2)))
				if err != nil {
					t.Fatal(err)
				}
				if wantFiles := int((before[table].rows + 6) / 7); len(m.Files) != wantFiles {
					t.Errorf("%s archive has %d files, want %d of at most 7 rows", table, len(m.Files), wantFiles)
				}
			}
			if sum, err := a.Run(ctx); err != nil || sum.Partitions != 0 {
				t.Errorf("second archiver Run = %d partitions, %v; want nothing to do", sum.Partitions, err)
			}

			cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet}
			res, err := cl.Run(ctx)
			if err != nil {
				t.Fatalf("cleanup with verified archives: %v", err)
			}
			if len(res.Dropped) != 2*len(c.tables) {
				t.Errorf("dropped %d partitions, want %d", len(res.Dropped), 2*len(c.tables))
			}
			for _, table := range c.tables {
				for _, n := range names(table, -3, -2) {
					for _, got := range retentiontest.Names(t, src, table) {
						if got == n {
							t.Errorf("partition %s still there after cleanup", n)
						}
					}
				}
			}

			for _, table := range c.tables {
				for round := 1; round <= 2; round++ {
					if _, err := a.Restore(ctx, table, retentiontest.Month(-2)); err != nil {
						t.Fatalf("restore %s round %d: %v", table, round, err)
					}
					n, h, err := retention.ContentHash(ctx, src, retentiontest.Find(t, src, table, retentiontest.Month(-2)))
					if err != nil {
						t.Fatal(err)
					}
					if n != before[table].rows || h != before[table].sum {
						t.Errorf("after restore %d %s has %d rows %s, want %d rows %s", round, table, n, h, before[table].rows, before[table].sum)
					}
				}
			}
		})
	}
}

// A damaged archive is caught: a changed chunk file fails restore before any
// row of it is inserted, and a changed manifest stops cleanup.
func TestArchiver_Damaged(t *testing.T) {
	ctx := context.Background()
	c := cases()[0]
	src := c.open(t)
	dir := t.TempDir()
	st, _ := store.NewDir(dir)
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 1000, Log: quiet, Table: "events.events", Month: retentiontest.Month(-2)}
	if sum, err := a.Run(ctx); err != nil || sum.Partitions != 1 {
		t.Fatalf("Run = %d partitions, %v; want 1", sum.Partitions, err)
	}
	prefix := retention.Prefix("events.events", retentiontest.Month(-2))
	p := retentiontest.Find(t, src, "events.events", retentiontest.Month(-2))

	t.Run("ErrVerify", func(t *testing.T) {
		m, sha, err := retention.ReadManifest(ctx, st, prefix)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, filepath.FromSlash(prefix+m.Files[0].Name))
		good, _ := os.ReadFile(file)
		defer os.WriteFile(file, good, 0o644)
		bad := append([]byte(nil), good...)
		bad[len(bad)/2] ^= 0xff
		os.WriteFile(file, bad, 0o644)
		if err := a.Verify(ctx, p, m, sha); !errors.Is(err, retention.ErrVerify) {
			t.Errorf("Verify of a damaged file = %v, want ErrVerify", err)
		}
		if err := src.Drop(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Restore(ctx, "events.events", retentiontest.Month(-2)); err == nil || !strings.Contains(err.Error(), "sha256") {
			t.Errorf("Restore of a damaged file = %v, want a sha256 mismatch", err)
		}
		p2 := retentiontest.Find(t, src, "events.events", retentiontest.Month(-2))
		if n, _ := src.Count(ctx, p2); n != 0 {
			t.Errorf("restore of a damaged file inserted %d rows, want 0", n)
		}
		os.WriteFile(file, good, 0o644)
		if _, err := a.Restore(ctx, "events.events", retentiontest.Month(-2)); err != nil {
			t.Fatalf("restore after repair: %v", err)
		}
	})
	t.Run("ManifestChanged", func(t *testing.T) {
		file := filepath.Join(dir, filepath.FromSlash(prefix+retention.ManifestName))
		good, _ := os.ReadFile(file)
		os.WriteFile(file, append(good, ' '), 0o644)
		defer os.WriteFile(file, good, 0o644)
		cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet}
		_, err := cl.Run(ctx)
		if !errors.Is(err, retention.ErrUnarchived) || !strings.Contains(err.Error(), p.Name) {
			t.Errorf("cleanup with a changed manifest = %v, want ErrUnarchived naming %s", err, p.Name)
		}
		if got := retentiontest.Names(t, src, "events.events"); len(got) == 0 || got[1] != p.Name {
			t.Errorf("partitions = %v, want %s kept", got, p.Name)
		}
	})
	t.Run("RowsAdded", func(t *testing.T) {
		// A row arriving after the archive makes it stale: cleanup keeps the
		// partition until it is archived again with --force.
		cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: quiet}
		rec, err := src.Record(ctx, "events.events", retentiontest.Month(-2))
		if err != nil {
			t.Fatal(err)
		}
		rec.Rows++
		if err := src.SaveRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		_, err = cl.Run(ctx)
		if !errors.Is(err, retention.ErrUnarchived) || !strings.Contains(err.Error(), "--force") {
			t.Errorf("cleanup with a stale archive = %v, want ErrUnarchived suggesting --force", err)
		}
		a.Force = true
		if sum, err := a.Run(ctx); err != nil || sum.Partitions != 1 {
			t.Fatalf("forced re-archive = %d partitions, %v", sum.Partitions, err)
		}
		a.Force = false
		res, err := cl.Run(ctx)
		if err == nil || len(res.Dropped) == 0 || res.Dropped[0].Name != p.Name {
			// facts.facts months are not archived in this test, so an error is expected,
			// but the re-archived events partition must drop.
			t.Errorf("cleanup after re-archive dropped %v (%v), want %s", res.Dropped, err, p.Name)
		}
	})
}
