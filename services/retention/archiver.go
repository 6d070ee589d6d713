package retention

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
	"time"
)

// ManifestFormat names the archive layout a manifest describes.
const ManifestFormat = "threatview-archive/1"

// ManifestName is the object written last in every archive directory: an
// archive without it is incomplete and never trusted.
const ManifestName = "manifest.json"

// FileEntry is one chunk file of an archive.
type FileEntry struct {
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Manifest describes one archived month of one table. ContentSHA256 is the
// SHA-256 of every row line plus "\n", in primary-key order, before
// compression: the same hash computed from the database proves the rows equal.
type Manifest struct {
	Format        string      `json:"format"`
	Database      string      `json:"database"`
	Table         string      `json:"table"`
	Partition     string      `json:"partition"`
	From          time.Time   `json:"from"`
	To            time.Time   `json:"to"`
	Rows          int64       `json:"rows"`
	Bytes         int64       `json:"bytes"`
	Encoding      string      `json:"encoding"`
	Columns       []Column    `json:"columns"`
	Files         []FileEntry `json:"files"`
	ContentSHA256 string      `json:"content_sha256"`
	SchemaVersion int64       `json:"schema_version"`
	CreatedAt     time.Time   `json:"created_at"`
}

// Prefix is the key prefix of table's archive for month: events.events/2026-08/.
func Prefix(table string, month time.Time) string {
	return table + "/" + MonthString(month) + "/"
}

// Archiver archives finished months of one Source into a Store.
type Archiver struct {
	Src       Source
	Store     Store
	ChunkRows int
	Log       *slog.Logger
	Now       func() time.Time
	// Table and Month, when set, restrict Run to that table or month.
	Table string
	Month time.Time
	// Force re-archives months that already have an archive record (for a
	// partition that gained rows after it was archived).
	Force bool
	// Late archives the rows held in the late table (events of months that
	// were archived and dropped) as supplementary archives; see RunLate.
	Late bool
	// AfterFile, when set, is called after each chunk file is stored; fault
	// tests use it to kill the process mid-archive.
	AfterFile func(n int)
}

func (a *Archiver) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Run archives every finished partition that has no archive record yet
// (with Force, also those that have one: as a new version beside it; with
// Late, it archives the held late rows instead, see RunLate). It keeps
// going after a failed partition and returns the first error.
func (a *Archiver) Run(ctx context.Context) (Summary, error) {
	if a.Late {
		return a.RunLate(ctx)
	}
	start := time.Now()
	var sum Summary
	unlock, err := a.Src.Lock(ctx)
	if err != nil {
		return sum, err
	}
	defer unlock()
	parts, err := a.Src.Partitions(ctx)
	if err != nil {
		return sum, err
	}
	now := a.now()
	var firstErr error
	for _, p := range parts {
		if !Finished(p, now) {
			continue
		}
		if (a.Table != "" && p.Table != a.Table) || (!a.Month.IsZero() && !p.Month.Equal(a.Month)) {
			continue
		}
		prefix := Prefix(p.Table, p.Month)
		_, err := a.Src.Record(ctx, p.Table, p.Month)
		switch {
		case err == nil && !a.Force:
			a.Log.Debug("already archived", "table", p.Table, "partition", p.Name)
			continue
		case err == nil:
			// The verified archive stays: a new version goes beside it, and
			// the record moves to it only once it is verified.
			if prefix, err = a.nextVersion(ctx, p); err != nil {
				return sum, err
			}
		case !errors.Is(err, ErrNotFound):
			return sum, err
		}
		m, err := a.archiveAt(ctx, p, prefix)
		if err != nil {
			a.Log.Error("archive failed", "table", p.Table, "partition", p.Name, "err", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		sum.Partitions++
		sum.Rows += m.Rows
		sum.Bytes += m.Bytes
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, firstErr
}

// Archive writes p to the store under its month's prefix, verifies it and
// records it. Whatever a crashed earlier attempt left directly under the
// prefix (never a version or supplementary directory beneath it) is removed
// first, manifest first, so there is never a manifest for files that
// changed. Only call it for a month without an archive record.
func (a *Archiver) Archive(ctx context.Context, p Partition) (Manifest, error) {
	return a.archiveAt(ctx, p, Prefix(p.Table, p.Month))
}

func (a *Archiver) archiveAt(ctx context.Context, p Partition, prefix string) (Manifest, error) {
	log := a.Log.With("table", p.Table, "partition", p.Name, "location", a.Store.Location(prefix))
	if err := a.clear(ctx, prefix); err != nil {
		return Manifest{}, err
	}
	log.Info("archive started")
	m, sha, err := a.write(ctx, p, prefix, func(emit func([]byte) error) error { return a.Src.Export(ctx, p, emit) }, log)
	if err != nil {
		return m, err
	}
	if err := a.verifyAt(ctx, p, prefix, m, sha); err != nil {
		return m, err
	}
	rec := Record{
		Table: p.Table, Partition: p.Name, From: m.From, To: m.To, Rows: m.Rows, Bytes: m.Bytes,
		Files: m.Files, ContentSHA256: m.ContentSHA256, ManifestSHA256: sha,
		Location: a.Store.Location(prefix), SchemaVersion: m.SchemaVersion, VerifiedAt: a.now().UTC(),
	}
	if err := a.Src.SaveRecord(ctx, rec); err != nil {
		return m, err
	}
	log.Info("archive verified", "rows", m.Rows, "bytes", m.Bytes, "files", len(m.Files), "content_sha256", m.ContentSHA256)
	return m, nil
}

// write stores the rows export emits under prefix as chunk files and then
// the manifest, and returns the manifest and its SHA-256.
func (a *Archiver) write(ctx context.Context, p Partition, prefix string, export func(emit func([]byte) error) error, log *slog.Logger) (Manifest, string, error) {
	cols, err := a.Src.Columns(ctx, p.Table)
	if err != nil {
		return Manifest{}, "", err
	}
	ver, err := a.Src.SchemaVersion(ctx)
	if err != nil {
		return Manifest{}, "", err
	}
	m := Manifest{
		Format: ManifestFormat, Database: a.Src.Name(), Table: p.Table, Partition: p.Name,
		From: p.Month, To: p.Month.AddDate(0, 1, 0), Encoding: "ndjson+gzip",
		Columns: cols, SchemaVersion: ver, CreatedAt: a.now().UTC(),
	}
	content := sha256.New()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	var fileRows int64
	flush := func() error {
		if err := zw.Close(); err != nil {
			return err
		}
		name := fmt.Sprintf("part-%05d.ndjson.gz", len(m.Files)+1)
		sum := sha256.Sum256(buf.Bytes())
		if err := a.Store.Put(ctx, prefix+name, buf.Bytes()); err != nil {
			return fmt.Errorf("store %s: %w", name, err)
		}
		m.Files = append(m.Files, FileEntry{Name: name, Rows: fileRows, Bytes: int64(buf.Len()), SHA256: hex.EncodeToString(sum[:])})
		m.Bytes += int64(buf.Len())
		log.Debug("archive file stored", "file", name, "rows", fileRows, "bytes", buf.Len())
		if a.AfterFile != nil {
			a.AfterFile(len(m.Files))
		}
		buf.Reset()
		zw.Reset(&buf)
		fileRows = 0
		return nil
	}
	err = export(func(line []byte) error {
		content.Write(line)
		content.Write(nl)
		if _, err := zw.Write(line); err != nil {
			return err
		}
		if _, err := zw.Write(nl); err != nil {
			return err
		}
		fileRows++
		m.Rows++
		if fileRows >= int64(a.ChunkRows) {
			return flush()
		}
		return nil
	})
	if err != nil {
		return m, "", fmt.Errorf("export %s: %w", p.Name, err)
	}
	if fileRows > 0 {
		if err := flush(); err != nil {
			return m, "", fmt.Errorf("export %s: %w", p.Name, err)
		}
	}
	m.ContentSHA256 = hex.EncodeToString(content.Sum(nil))
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, "", err
	}
	if err := a.Store.Put(ctx, prefix+ManifestName, raw); err != nil {
		return m, "", fmt.Errorf("store manifest: %w", err)
	}
	msum := sha256.Sum256(raw)
	return m, hex.EncodeToString(msum[:]), nil
}

// nextVersion returns the prefix of a new version of p's archive:
// <table>/<month>/vN/ with N above every version present (the first
// archive, directly under the month, is version 1). Nothing there is
// touched, verified or not.
func (a *Archiver) nextVersion(ctx context.Context, p Partition) (string, error) {
	prefix := Prefix(p.Table, p.Month)
	keys, err := a.Store.List(ctx, prefix)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", prefix, err)
	}
	n := 1
	for _, k := range keys {
		if v, ok := versionOf(prefix, k); ok && v > n {
			n = v
		}
	}
	return fmt.Sprintf("%sv%d/", prefix, n+1), nil
}

// versionOf returns N when key lies under prefix+"vN/".
func versionOf(prefix, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, prefix+"v")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "/")
	if !ok || num == "" {
		return 0, false
	}
	n := 0
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// FindManifest returns the prefix and manifest of the version of table's
// archive for month whose manifest has the SHA-256 sha (the one its record
// names), looking at the month's first archive and its vN/ versions.
func FindManifest(ctx context.Context, st Store, table string, month time.Time, sha string) (string, Manifest, error) {
	prefix := Prefix(table, month)
	keys, err := st.List(ctx, prefix)
	if err != nil {
		return "", Manifest{}, fmt.Errorf("list %s: %w", st.Location(prefix), err)
	}
	var firstErr error
	for _, k := range keys {
		dir, ok := strings.CutSuffix(k, ManifestName)
		if !ok {
			continue
		}
		if _, isVersion := versionOf(prefix, k); dir != prefix && !isVersion {
			continue // a supplementary archive
		}
		m, got, err := ReadManifest(ctx, st, dir)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if got == sha {
			return dir, m, nil
		}
	}
	if firstErr != nil {
		return "", Manifest{}, firstErr
	}
	return "", Manifest{}, fmt.Errorf("no manifest under %s has the recorded sha256 %s: %w", st.Location(prefix), sha, ErrNotFound)
}

var nl = []byte{'\n'}

// clear removes the objects directly under prefix (an incomplete archive:
// there is no record for it), the manifest first. Versions and
// supplementary archives in directories beneath it are never touched.
func (a *Archiver) clear(ctx context.Context, prefix string) error {
	all, err := a.Store.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	var keys []string
	for _, k := range all {
		if !strings.Contains(strings.TrimPrefix(k, prefix), "/") {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	a.Log.Info("removing incomplete archive", "location", a.Store.Location(prefix), "objects", len(keys))
	if err := a.Store.Delete(ctx, prefix+ManifestName); err != nil {
		return fmt.Errorf("delete %s: %w", prefix+ManifestName, err)
	}
	for _, k := range keys {
		if err := a.Store.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	return nil
}

// Verify re-reads the archive of p from the store and checks it against
// want (what was exported) and the database: the manifest's checksum, every
// file's SHA-256 and row count, the total row count and content hash, and
// the partition's current row count.
func (a *Archiver) Verify(ctx context.Context, p Partition, want Manifest, manifestSHA string) error {
	return a.verifyAt(ctx, p, Prefix(p.Table, p.Month), want, manifestSHA)
}

func (a *Archiver) verifyAt(ctx context.Context, p Partition, prefix string, want Manifest, manifestSHA string) error {
	if err := verifyStored(ctx, a.Store, p, prefix, want, manifestSHA); err != nil {
		return err
	}
	n, err := a.Src.Count(ctx, p)
	if err != nil {
		return err
	}
	if n != want.Rows {
		return fmt.Errorf("%w: %s: partition now has %d rows, archive %d", ErrVerify, p.Name, n, want.Rows)
	}
	return nil
}

// verifyStored re-reads the archive under prefix and checks it against want:
// the manifest's checksum, every file's SHA-256 and row count, the total
// row count and the content hash.
func verifyStored(ctx context.Context, st Store, p Partition, prefix string, want Manifest, manifestSHA string) error {
	got, gotSHA, err := ReadManifest(ctx, st, prefix)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrVerify, err)
	}
	if gotSHA != manifestSHA {
		return fmt.Errorf("%w: manifest of %s changed: sha256 %s, wrote %s", ErrVerify, p.Name, gotSHA, manifestSHA)
	}
	var rows int64
	content := sha256.New()
	for _, f := range got.Files {
		n, err := readFile(ctx, st, prefix, f, content, nil)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrVerify, err)
		}
		rows += n
	}
	if rows != want.Rows {
		return fmt.Errorf("%w: %s: archive has %d rows, exported %d", ErrVerify, p.Name, rows, want.Rows)
	}
	if h := hex.EncodeToString(content.Sum(nil)); h != want.ContentSHA256 {
		return fmt.Errorf("%w: %s: archive content sha256 %s, database %s", ErrVerify, p.Name, h, want.ContentSHA256)
	}
	return nil
}

// ReadManifest loads and parses the manifest under prefix and returns it with
// its SHA-256.
func ReadManifest(ctx context.Context, st Store, prefix string) (Manifest, string, error) {
	r, err := st.Get(ctx, prefix+ManifestName)
	if err != nil {
		return Manifest{}, "", fmt.Errorf("read manifest %s: %w", st.Location(prefix+ManifestName), err)
	}
	defer r.Close()
	raw, err := io.ReadAll(r)
	if err != nil {
		return Manifest{}, "", fmt.Errorf("read manifest %s: %w", st.Location(prefix+ManifestName), err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Manifest{}, "", fmt.Errorf("parse manifest %s: %w", st.Location(prefix+ManifestName), err)
	}
	if m.Format != ManifestFormat {
		return Manifest{}, "", fmt.Errorf("manifest %s: format %q, want %q", st.Location(prefix+ManifestName), m.Format, ManifestFormat)
	}
	sum := sha256.Sum256(raw)
	return m, hex.EncodeToString(sum[:]), nil
}

// readFile reads one chunk file fully, checks its SHA-256 and row count,
// adds its lines to content and hands each line to each (if set) in order.
func readFile(ctx context.Context, st Store, prefix string, f FileEntry, content hash.Hash, each func(line []byte) error) (int64, error) {
	r, err := st.Get(ctx, prefix+f.Name)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", f.Name, err)
	}
	raw, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", f.Name, err)
	}
	sum := sha256.Sum256(raw)
	if h := hex.EncodeToString(sum[:]); h != f.SHA256 || int64(len(raw)) != f.Bytes {
		return 0, fmt.Errorf("%s: sha256 %s (%d bytes), manifest says %s (%d bytes)", f.Name, h, len(raw), f.SHA256, f.Bytes)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.Name, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	var n int64
	for sc.Scan() {
		line := sc.Bytes()
		content.Write(line)
		content.Write(nl)
		n++
		if each != nil {
			if err := each(line); err != nil {
				return n, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("%s: %w", f.Name, err)
	}
	if n != f.Rows {
		return n, fmt.Errorf("%s: %d rows, manifest says %d", f.Name, n, f.Rows)
	}
	return n, nil
}

// ContentHash computes the row count and content hash of p from the database,
// the same way the archiver computes them while exporting.
func ContentHash(ctx context.Context, src Source, p Partition) (int64, string, error) {
	h := sha256.New()
	var n int64
	err := src.Export(ctx, p, func(line []byte) error {
		h.Write(line)
		h.Write(nl)
		n++
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// restoreBatch is how many rows one insert statement restores.
const restoreBatch = 500

// Restore loads the archived month of table back into the database, creating
// the partition if it is missing. Rows already present are skipped, so it is
// safe to run again. Every file is checked against the manifest before its
// rows are inserted; at the end the partition's rows must hash to the
// manifest's content hash (more rows than archived is reported, not an error).
func (a *Archiver) Restore(ctx context.Context, table string, month time.Time) (Summary, error) {
	start := time.Now()
	var sum Summary
	month = MonthStart(month)
	// The version the record names (after --force there are several), or
	// the first archive when the database has no record any more.
	prefix := Prefix(table, month)
	var m Manifest
	rec, err := a.Src.Record(ctx, table, month)
	switch {
	case err == nil:
		prefix, m, err = FindManifest(ctx, a.Store, table, month, rec.ManifestSHA256)
	case errors.Is(err, ErrNotFound):
		m, _, err = ReadManifest(ctx, a.Store, prefix)
	}
	if err != nil {
		return sum, err
	}
	late, err := a.lateManifests(ctx, table, month)
	if err != nil {
		return sum, err
	}
	if m.Table != table || !m.From.Equal(month) {
		return sum, fmt.Errorf("manifest %s is for %s %s", a.Store.Location(prefix), m.Table, MonthString(m.From))
	}
	unlock, err := a.Src.Lock(ctx)
	if err != nil {
		return sum, err
	}
	defer unlock()
	ver, err := a.Src.SchemaVersion(ctx)
	if err != nil {
		return sum, err
	}
	if ver != m.SchemaVersion {
		a.Log.Warn("schema version differs from archive", "archive", m.SchemaVersion, "database", ver)
	}
	if err := checkColumns(ctx, a.Src, table, m.Columns); err != nil {
		return sum, err
	}
	p, err := a.Src.EnsurePartition(ctx, table, month)
	if err != nil {
		return sum, err
	}
	log := a.Log.With("table", table, "partition", p.Name, "location", a.Store.Location(prefix))
	log.Info("restore started", "rows", m.Rows, "files", len(m.Files))
	content := sha256.New()
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
	for _, f := range m.Files {
		n, err := readFile(ctx, a.Store, prefix, f, content, func(line []byte) error {
			batch = append(batch, bytes.Clone(line))
			if len(batch) == restoreBatch {
				return insert()
			}
			return nil
		})
		if err != nil {
			return sum, fmt.Errorf("restore %s: %w", f.Name, err)
		}
		if len(batch) > 0 {
			if err := insert(); err != nil {
				return sum, fmt.Errorf("restore %s: %w", f.Name, err)
			}
		}
		sum.Rows += n
		sum.Bytes += f.Bytes
	}
	if h := hex.EncodeToString(content.Sum(nil)); h != m.ContentSHA256 {
		return sum, fmt.Errorf("%w: archive content sha256 %s, manifest %s", ErrVerify, h, m.ContentSHA256)
	}
	if len(late) > 0 {
		return a.restoreLate(ctx, p, m, late, inserted, sum, start, log)
	}
	n, h, err := ContentHash(ctx, a.Src, p)
	if err != nil {
		return sum, err
	}
	switch {
	case n == m.Rows && h == m.ContentSHA256:
		log.Info("restore verified", "rows", n, "inserted", inserted, "content_sha256", h)
	case n > m.Rows:
		log.Warn("partition holds more rows than the archive", "rows", n, "archived", m.Rows, "inserted", inserted)
	default:
		return sum, fmt.Errorf("%w: after restore %s has %d rows (sha256 %s), archive %d (sha256 %s)", ErrVerify, p.Name, n, h, m.Rows, m.ContentSHA256)
	}
	sum.Partitions = 1
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

func checkColumns(ctx context.Context, src Source, table string, want []Column) error {
	have, err := src.Columns(ctx, table)
	if err != nil {
		return err
	}
	names := make(map[string]bool, len(have))
	for _, c := range have {
		names[c.Name] = true
	}
	var missing []string
	for _, c := range want {
		if !names[c.Name] {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("table %s has no column %s that the archive holds", table, strings.Join(missing, ", "))
	}
	return nil
}
