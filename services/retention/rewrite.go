package retention

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Rewritten is one archive rewritten without a data subject's rows.
type Rewritten struct {
	Table         string `json:"table"`
	Month         string `json:"month"`
	RowsRemoved   int64  `json:"rows_removed"`
	Rows          int64  `json:"rows"`
	ContentSHA256 string `json:"content_sha256"`
	OldLocation   string `json:"old_location"`
	Location      string `json:"location"`
}

// RewriteWithout rewrites the verified archive of table's month (the
// version its record names) as a new version without the rows drop
// matches: the kept rows are written as a new version beside it, re-read
// and verified (every file's SHA-256 and row count, the content hash), the
// record moves to it (row count, checksums, location), and only then are
// the old version's objects removed, its manifest first. This is the one
// exception to "no command deletes a verified archive"; the caller audits
// it. It reports false when the month has no archive record or its archive
// holds no matching row (nothing is written then).
func (a *Archiver) RewriteWithout(ctx context.Context, table string, month time.Time, drop func(line []byte) (bool, error)) (Rewritten, bool, error) {
	out := Rewritten{Table: table, Month: MonthString(month)}
	rec, err := a.Src.Record(ctx, table, month)
	if errors.Is(err, ErrNotFound) {
		return out, false, nil
	}
	if err != nil {
		return out, false, err
	}
	oldPrefix, old, err := FindManifest(ctx, a.Store, table, month, rec.ManifestSHA256)
	if err != nil {
		return out, false, err
	}
	out.OldLocation = a.Store.Location(oldPrefix)
	// First pass: check the old version whole and count the rows to drop.
	content := sha256.New()
	var rows int64
	for _, f := range old.Files {
		n, err := readFile(ctx, a.Store, oldPrefix, f, content, func(line []byte) error {
			d, err := drop(line)
			if d {
				out.RowsRemoved++
			}
			return err
		})
		if err != nil {
			return out, false, fmt.Errorf("%w: %v", ErrVerify, err)
		}
		rows += n
	}
	if h := hex.EncodeToString(content.Sum(nil)); rows != old.Rows || h != old.ContentSHA256 {
		return out, false, fmt.Errorf("%w: archive at %s has %d rows %s, manifest %d rows %s", ErrVerify, out.OldLocation, rows, h, old.Rows, old.ContentSHA256)
	}
	if out.RowsRemoved == 0 {
		return out, false, nil
	}
	cols, err := a.Src.Columns(ctx, table)
	if err != nil {
		return out, false, err
	}
	if !slices.Equal(cols, old.Columns) {
		return out, false, fmt.Errorf("archive at %s has other columns than %s now: restore it, erase, and re-archive (archiver --force)", out.OldLocation, table)
	}
	p := Partition{Table: table, Month: month, Name: old.Partition}
	newPrefix, err := a.nextVersion(ctx, p)
	if err != nil {
		return out, false, err
	}
	log := a.Log.With("table", table, "partition", p.Name, "location", a.Store.Location(newPrefix))
	m, sha, err := a.write(ctx, p, newPrefix, func(emit func([]byte) error) error {
		h := sha256.New()
		for _, f := range old.Files {
			if _, err := readFile(ctx, a.Store, oldPrefix, f, h, func(line []byte) error {
				d, err := drop(line)
				if err != nil || d {
					return err
				}
				return emit(line)
			}); err != nil {
				return err
			}
		}
		return nil
	}, log)
	if err != nil {
		return out, false, err
	}
	if m.Rows != old.Rows-out.RowsRemoved {
		return out, false, fmt.Errorf("%w: rewrite of %s wrote %d rows, want %d", ErrVerify, out.OldLocation, m.Rows, old.Rows-out.RowsRemoved)
	}
	if err := verifyStored(ctx, a.Store, p, newPrefix, m, sha); err != nil {
		return out, false, err
	}
	rec.Rows, rec.Bytes, rec.Files, rec.ContentSHA256, rec.ManifestSHA256 = m.Rows, m.Bytes, m.Files, m.ContentSHA256, sha
	rec.Location, rec.SchemaVersion, rec.VerifiedAt = a.Store.Location(newPrefix), m.SchemaVersion, a.now().UTC()
	if err := a.Src.SaveRecord(ctx, rec); err != nil {
		return out, false, err
	}
	log.Info("archive rewritten without a data subject's rows", "rows", m.Rows, "rows_removed", out.RowsRemoved, "old_location", out.OldLocation)
	out.Rows, out.ContentSHA256, out.Location = m.Rows, m.ContentSHA256, rec.Location
	if err := a.removeVersion(ctx, oldPrefix); err != nil {
		return out, true, fmt.Errorf("new version verified and recorded; old version at %s not removed: %w", out.OldLocation, err)
	}
	return out, true, nil
}

// removeVersion deletes the objects of one archive version, manifest
// first: the month's first version lies directly under its prefix (the
// versions and supplementary archives beneath are not touched), a later
// one under vN/.
func (a *Archiver) removeVersion(ctx context.Context, prefix string) error {
	all, err := a.Store.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	if err := a.Store.Delete(ctx, prefix+ManifestName); err != nil {
		return fmt.Errorf("delete %s: %w", prefix+ManifestName, err)
	}
	for _, k := range all {
		if strings.Contains(strings.TrimPrefix(k, prefix), "/") {
			continue
		}
		if err := a.Store.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	return nil
}

// ReadArchive hands each row of the verified archive of table's month (the
// version its record names) to each, in order, checking every file's
// SHA-256 and row count on the way. A month without an archive record is
// ErrNotFound.
func (a *Archiver) ReadArchive(ctx context.Context, table string, month time.Time, each func(line []byte) error) error {
	rec, err := a.Src.Record(ctx, table, month)
	if err != nil {
		return err
	}
	prefix, m, err := FindManifest(ctx, a.Store, table, month, rec.ManifestSHA256)
	if err != nil {
		return err
	}
	content := sha256.New()
	for _, f := range m.Files {
		if _, err := readFile(ctx, a.Store, prefix, f, content, each); err != nil {
			return fmt.Errorf("%w: %v", ErrVerify, err)
		}
	}
	return nil
}
