package retention

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// LatePrefix is the directory segment of a supplementary archive:
// <table>/<month>/late-<UTC time>/.
const LatePrefix = "late-"

// RunLate archives the rows held in the late table, one supplementary
// archive per month under <table>/<month>/late-<time>/, beside the month's
// verified archive (which is never touched). Each is written, re-read and
// checked like a partition's archive; then, in one transaction, it is
// recorded and exactly the rows it holds leave the late table. A crash
// before that leaves an unrecorded directory and the rows held, and the next
// run writes a new directory. Sources without a late table have nothing to do.
func (a *Archiver) RunLate(ctx context.Context) (Summary, error) {
	start := time.Now()
	var sum Summary
	ls, ok := a.Src.(LateSource)
	if !ok {
		a.Log.Info("no late table in this database", "database", a.Src.Name())
		return sum, nil
	}
	unlock, err := a.Src.Lock(ctx)
	if err != nil {
		return sum, err
	}
	defer unlock()
	months, err := ls.LateMonths(ctx)
	if err != nil {
		return sum, err
	}
	var firstErr error
	for _, p := range months {
		if (a.Table != "" && p.Table != a.Table) || (!a.Month.IsZero() && !p.Month.Equal(a.Month)) {
			continue
		}
		n, err := a.archiveLate(ctx, ls, p)
		if err != nil {
			a.Log.Error("late archive failed", "table", p.Table, "month", MonthString(p.Month), "err", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		sum.Partitions++
		sum.Rows += n.Rows
		sum.Bytes += n.Bytes
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, firstErr
}

func (a *Archiver) archiveLate(ctx context.Context, ls LateSource, p Partition) (Manifest, error) {
	prefix := Prefix(p.Table, p.Month) + LatePrefix + a.now().UTC().Format("20060102T150405.000000000Z") + "/"
	log := a.Log.With("table", p.Table, "month", MonthString(p.Month), "location", a.Store.Location(prefix))
	log.Info("late archive started")
	var lines [][]byte
	m, sha, err := a.write(ctx, p, prefix, func(emit func([]byte) error) error {
		return ls.ExportLate(ctx, p, func(line []byte) error {
			lines = append(lines, bytes.Clone(line))
			return emit(line)
		})
	}, log)
	if err != nil {
		return m, err
	}
	if err := verifyStored(ctx, a.Store, p, prefix, m, sha); err != nil {
		return m, err
	}
	rec := LateRecord{
		Table: p.Table, Month: p.Month, Prefix: prefix, Rows: m.Rows, ContentSHA256: m.ContentSHA256,
		ManifestSHA256: sha, Location: a.Store.Location(prefix), VerifiedAt: a.now().UTC(),
	}
	n, err := ls.SaveLate(ctx, rec, lines)
	if err != nil {
		return m, err
	}
	log.Info("late archive verified", "rows", m.Rows, "released", n, "bytes", m.Bytes, "content_sha256", m.ContentSHA256)
	return m, nil
}

// lateManifests returns the prefixes of table's supplementary archives for
// month, oldest first.
func (a *Archiver) lateManifests(ctx context.Context, table string, month time.Time) ([]string, error) {
	prefix := Prefix(table, month)
	keys, err := a.Store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", a.Store.Location(prefix), err)
	}
	var out []string
	for _, k := range keys {
		dir, ok := strings.CutSuffix(k, ManifestName)
		if !ok {
			continue
		}
		if rest := strings.TrimPrefix(dir, prefix); strings.HasPrefix(rest, LatePrefix) && strings.Count(rest, "/") == 1 {
			out = append(out, dir)
		}
	}
	slices.Sort(out)
	return out, nil
}

// restoreLate loads the supplementary archives into p after its main
// archive m (whose inserted rows are counted in inserted), checking every
// file, and requires the partition to hold at least the rows of all of them.
func (a *Archiver) restoreLate(ctx context.Context, p Partition, m Manifest, late []string, inserted int64, sum Summary, start time.Time, log *slog.Logger) (Summary, error) {
	want := m.Rows
	for _, prefix := range late {
		lm, _, err := ReadManifest(ctx, a.Store, prefix)
		if err != nil {
			return sum, err
		}
		if lm.Table != p.Table || !lm.From.Equal(p.Month) {
			return sum, fmt.Errorf("manifest %s is for %s %s", a.Store.Location(prefix), lm.Table, MonthString(lm.From))
		}
		n, err := a.insertArchive(ctx, p.Table, prefix, lm)
		if err != nil {
			return sum, err
		}
		inserted += n
		want += lm.Rows
		sum.Rows += lm.Rows
		sum.Bytes += lm.Bytes
		log.Info("supplementary archive restored", "location", a.Store.Location(prefix), "rows", lm.Rows, "inserted", n)
	}
	n, err := a.Src.Count(ctx, p)
	if err != nil {
		return sum, err
	}
	switch {
	case n == want:
		log.Info("restore verified", "rows", n, "inserted", inserted, "supplementary", len(late))
	case n > want:
		log.Warn("partition holds more rows than the archives", "rows", n, "archived", want, "inserted", inserted)
	default:
		return sum, fmt.Errorf("%w: after restore %s has %d rows, its archives %d", ErrVerify, p.Name, n, want)
	}
	sum.Partitions = 1
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// insertArchive inserts every row of the archive under prefix, checking
// each file and the content hash, and returns how many rows were new.
func (a *Archiver) insertArchive(ctx context.Context, table, prefix string, m Manifest) (int64, error) {
	if err := checkColumns(ctx, a.Src, table, m.Columns); err != nil {
		return 0, err
	}
	var inserted int64
	batch := make([][]byte, 0, restoreBatch)
	insert := func() error {
		n, err := a.Src.Insert(ctx, table, m.Columns, batch)
		if err != nil {
			return err
		}
		inserted += n
		batch = batch[:0]
		return nil
	}
	content := newContentHash()
	for _, f := range m.Files {
		if _, err := readFile(ctx, a.Store, prefix, f, content, func(line []byte) error {
			batch = append(batch, bytes.Clone(line))
			if len(batch) == restoreBatch {
				return insert()
			}
			return nil
		}); err != nil {
			return inserted, fmt.Errorf("restore %s%s: %w", prefix, f.Name, err)
		}
		if len(batch) > 0 {
			if err := insert(); err != nil {
				return inserted, err
			}
		}
	}
	if h := fmt.Sprintf("%x", content.Sum(nil)); h != m.ContentSHA256 {
		return inserted, fmt.Errorf("%w: %s content sha256 %s, manifest %s", ErrVerify, a.Store.Location(prefix), h, m.ContentSHA256)
	}
	return inserted, nil
}

func newContentHash() hash.Hash { return sha256.New() }
