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

// Rewritten is one archive rewritten without a data subject's rows (or
// with them redacted).
type Rewritten struct {
	Table         string `json:"table"`
	Month         string `json:"month"`
	RowsRemoved   int64  `json:"rows_removed"`
	RowsRedacted  int64  `json:"rows_redacted,omitempty"`
	Rows          int64  `json:"rows"`
	ContentSHA256 string `json:"content_sha256"`
	OldLocation   string `json:"old_location"`
	Location      string `json:"location"`
	// Late is set for a supplementary (late) archive.
	Late bool `json:"late,omitempty"`
	// RollupRows is how many rollup rows the removed rows were subtracted
	// from (facts of a month archived and dropped; set by the caller).
	RollupRows int64 `json:"rollup_rows_adjusted,omitempty"`
}

// Edit decides an archived row's fate in a rewrite: keep it (changed
// false), drop it (out nil, changed true) or replace it by out (changed
// true). It may be called more than once for the same row and must answer
// the same each time; line is only valid during the call.
type Edit func(line []byte) (out []byte, changed bool, err error)

// DropRows is the Edit that drops the rows drop matches.
func DropRows(drop func(line []byte) (bool, error)) Edit {
	return func(line []byte) ([]byte, bool, error) {
		d, err := drop(line)
		return nil, d, err
	}
}

// RewriteWithout rewrites the verified archive of table's month without
// the rows drop matches: RewriteEach with DropRows(drop).
func (a *Archiver) RewriteWithout(ctx context.Context, table string, month time.Time, drop func(line []byte) (bool, error)) (Rewritten, bool, error) {
	return a.RewriteEach(ctx, table, month, DropRows(drop))
}

// RewriteEach rewrites the verified archive of table's month (the version
// its record names) as a new version with edit applied to every row: the
// rows are written as a new version beside it, re-read and verified (every
// file's SHA-256 and row count, the content hash), the record moves to it
// (row count, checksums, location), and only then are the old version's
// objects removed, its manifest first. This is the one exception to "no
// command deletes a verified archive"; the caller audits it. It reports
// false when the month has no archive record or edit changes no row of its
// archive (nothing is written then).
func (a *Archiver) RewriteEach(ctx context.Context, table string, month time.Time, edit Edit) (Rewritten, bool, error) {
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
	if err := a.countEdits(ctx, oldPrefix, old, edit, &out); err != nil || out.RowsRemoved+out.RowsRedacted == 0 {
		return out, false, err
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
	m, sha, err := a.writeEdited(ctx, p, oldPrefix, old, newPrefix, edit, &out)
	if err != nil {
		return out, false, err
	}
	rec.Rows, rec.Bytes, rec.Files, rec.ContentSHA256, rec.ManifestSHA256 = m.Rows, m.Bytes, m.Files, m.ContentSHA256, sha
	rec.Location, rec.SchemaVersion, rec.VerifiedAt = a.Store.Location(newPrefix), m.SchemaVersion, a.now().UTC()
	if err := a.Src.SaveRecord(ctx, rec); err != nil {
		return out, false, err
	}
	a.Log.Info("archive rewritten for a data subject's erasure", "table", table, "partition", p.Name, "location", rec.Location,
		"rows", m.Rows, "rows_removed", out.RowsRemoved, "rows_redacted", out.RowsRedacted, "old_location", out.OldLocation)
	out.Rows, out.ContentSHA256, out.Location = m.Rows, m.ContentSHA256, rec.Location
	if err := a.removeVersion(ctx, oldPrefix); err != nil {
		return out, true, fmt.Errorf("new version verified and recorded; old version at %s not removed: %w", out.OldLocation, err)
	}
	return out, true, nil
}

// countEdits reads the archive m under prefix whole, checking every file
// and the content hash, and counts the rows edit drops and replaces into
// out.
func (a *Archiver) countEdits(ctx context.Context, prefix string, m Manifest, edit Edit, out *Rewritten) error {
	content := sha256.New()
	var rows int64
	for _, f := range m.Files {
		n, err := readFile(ctx, a.Store, prefix, f, content, func(line []byte) error {
			o, changed, err := edit(line)
			switch {
			case changed && o == nil:
				out.RowsRemoved++
			case changed:
				out.RowsRedacted++
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrVerify, err)
		}
		rows += n
	}
	if h := hex.EncodeToString(content.Sum(nil)); rows != m.Rows || h != m.ContentSHA256 {
		return fmt.Errorf("%w: archive at %s has %d rows %s, manifest %d rows %s", ErrVerify, a.Store.Location(prefix), rows, h, m.Rows, m.ContentSHA256)
	}
	return nil
}

// writeEdited writes the rows of the archive old (under oldPrefix) with
// edit applied as a new archive under newPrefix and verifies it: its row
// count must be old's less the rows out says edit drops.
func (a *Archiver) writeEdited(ctx context.Context, p Partition, oldPrefix string, old Manifest, newPrefix string, edit Edit, out *Rewritten) (Manifest, string, error) {
	log := a.Log.With("table", p.Table, "partition", p.Name, "location", a.Store.Location(newPrefix))
	m, sha, err := a.write(ctx, p, newPrefix, func(emit func([]byte) error) error {
		h := sha256.New()
		for _, f := range old.Files {
			if _, err := readFile(ctx, a.Store, oldPrefix, f, h, func(line []byte) error {
				o, changed, err := edit(line)
				switch {
				case err != nil:
					return err
				case !changed:
					return emit(line)
				case o != nil:
					return emit(o)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}, log)
	if err != nil {
		return m, sha, err
	}
	if m.Rows != old.Rows-out.RowsRemoved {
		return m, sha, fmt.Errorf("%w: rewrite of %s wrote %d rows, want %d", ErrVerify, a.Store.Location(oldPrefix), m.Rows, old.Rows-out.RowsRemoved)
	}
	return m, sha, verifyStored(ctx, a.Store, p, newPrefix, m, sha)
}

// RewriteLate rewrites each supplementary (late) archive of table's month
// in which edit changes a row, as RewriteEach does a month's archive: a new
// supplementary archive under a new late-<time>/ prefix is written and
// verified, the database's record of the old one moves to it, and only then
// are the old one's objects removed. Every supplementary archive in the
// store is read, recorded or not (a restore loads them all). It returns
// what it rewrote.
func (a *Archiver) RewriteLate(ctx context.Context, table string, month time.Time, edit Edit) ([]Rewritten, error) {
	var done []Rewritten
	ls, ok := a.Src.(LateSource)
	if !ok {
		return done, nil
	}
	prefixes, err := a.lateManifests(ctx, table, month)
	if err != nil {
		return done, err
	}
	for _, oldPrefix := range prefixes {
		out := Rewritten{Table: table, Month: MonthString(month), Late: true, OldLocation: a.Store.Location(oldPrefix)}
		old, _, err := ReadManifest(ctx, a.Store, oldPrefix)
		if err != nil {
			return done, err
		}
		if err := a.countEdits(ctx, oldPrefix, old, edit, &out); err != nil {
			return done, err
		}
		if out.RowsRemoved+out.RowsRedacted == 0 {
			continue
		}
		p := Partition{Table: table, Month: month, Name: old.Partition}
		newPrefix := Prefix(table, month) + LatePrefix + a.now().UTC().Format("20060102T150405.000000000Z") + "/"
		if newPrefix <= oldPrefix {
			return done, fmt.Errorf("rewrite of %s: the clock is behind its name", out.OldLocation)
		}
		m, sha, err := a.writeEdited(ctx, p, oldPrefix, old, newPrefix, edit, &out)
		if err != nil {
			return done, err
		}
		rec := LateRecord{Table: table, Month: month, Prefix: newPrefix, Rows: m.Rows, ContentSHA256: m.ContentSHA256,
			ManifestSHA256: sha, Location: a.Store.Location(newPrefix), VerifiedAt: a.now().UTC()}
		if err := ls.ReplaceLate(ctx, oldPrefix, rec); err != nil {
			return done, err
		}
		a.Log.Info("supplementary archive rewritten for a data subject's erasure", "table", table, "month", out.Month,
			"location", rec.Location, "rows", m.Rows, "rows_removed", out.RowsRemoved, "old_location", out.OldLocation)
		out.Rows, out.ContentSHA256, out.Location = m.Rows, m.ContentSHA256, rec.Location
		done = append(done, out)
		if err := a.removeVersion(ctx, oldPrefix); err != nil {
			return done, fmt.Errorf("new supplementary archive verified and recorded; old one at %s not removed: %w", out.OldLocation, err)
		}
	}
	return done, nil
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
