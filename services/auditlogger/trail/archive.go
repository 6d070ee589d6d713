package trail

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"threatview/auditlogger"
)

// ArchivedRows reads the archived months of audit_events that the retention
// archiver wrote to dir (its directory target: dir/audit_events/YYYY-MM/
// part-*.ndjson.gz beside manifest.json; an S3 target is read after a sync
// to a directory). It returns their rows in sequence order and the months
// found. Each line is the row's columns as text, binary ones in base64: the
// archive keeps seq and leaf_hash with the fields, so a dropped month stays
// provable. Rows are held in memory (about 300 bytes each).
func ArchivedRows(dir string) ([]Row, map[time.Time]bool, error) {
	months := map[time.Time]bool{}
	versions, err := archiveVersions(dir)
	if err != nil {
		return nil, nil, err
	}
	var rows []Row
	for monthDir, versionDir := range versions {
		month, err := time.Parse("2006-01", filepath.Base(monthDir))
		if err != nil {
			continue
		}
		months[month] = true
		parts, _ := filepath.Glob(filepath.Join(versionDir, "part-*.ndjson.gz"))
		sort.Strings(parts)
		for _, p := range parts {
			rs, err := readArchivePart(p)
			if err != nil {
				return nil, nil, err
			}
			rows = append(rows, rs...)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].HasSeq != rows[j].HasSeq {
			return rows[i].HasSeq
		}
		if !rows[i].HasSeq {
			return rowBefore(&rows[i], &rows[j])
		}
		return rows[i].Seq < rows[j].Seq
	})
	return rows, months, nil
}

// archiveVersions maps each archived month's directory to the directory of
// its latest version: the month's first version lies directly under it, a
// later one (archiver --force, or a rewrite after an erasure, which removes
// the version before it) under vN/. The latest is the one the archive
// record names: each new version is recorded once verified.
func archiveVersions(dir string) (map[string]string, error) {
	first, err := filepath.Glob(filepath.Join(dir, "audit_events", "*", "manifest.json"))
	if err != nil {
		return nil, err
	}
	later, err := filepath.Glob(filepath.Join(dir, "audit_events", "*", "v*", "manifest.json"))
	if err != nil {
		return nil, err
	}
	out, version := map[string]string{}, map[string]int{}
	for _, m := range first {
		out[filepath.Dir(m)], version[filepath.Dir(m)] = filepath.Dir(m), 1
	}
	for _, m := range later {
		v := filepath.Dir(m)
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(v), "v"))
		if err != nil || n < 2 {
			continue
		}
		if month := filepath.Dir(v); n > version[month] {
			out[month], version[month] = v, n
		}
	}
	return out, nil
}

func readArchivePart(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []Row
	for n := 1; sc.Scan(); n++ {
		var raw map[string]*string
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		r, err := archivedRow(raw)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// archivedRow rebuilds a Row from an archive line's columns.
func archivedRow(c map[string]*string) (Row, error) {
	var r Row
	str := func(k string) string {
		if v := c[k]; v != nil {
			return *v
		}
		return ""
	}
	bin := func(k string) ([]byte, error) {
		if c[k] == nil {
			return nil, nil
		}
		return base64.StdEncoding.DecodeString(*c[k])
	}
	id, err := bin("id")
	if err != nil || len(id) != 16 {
		return r, fmt.Errorf("id: not 16 bytes")
	}
	r.Record.ID = auditlogger.FormatID([16]byte(id))
	t, err := time.Parse("2006-01-02 15:04:05.999999", str("time"))
	if err != nil {
		return r, fmt.Errorf("time: %w", err)
	}
	r.Record.Time = t.UTC()
	r.Record.ActorToken, r.Record.ActorApp = str("actor_token_id"), str("actor_app_id")
	r.Record.Action, r.Record.Resource = str("action"), str("resource")
	r.Record.UserAgent, r.Record.RequestID = str("user_agent"), str("request_id")
	if r.Record.Outcome, err = strconv.Atoi(str("outcome")); err != nil {
		return r, fmt.Errorf("outcome: %w", err)
	}
	if r.Record.EventCount, err = strconv.Atoi(str("event_count")); err != nil {
		return r, fmt.Errorf("event_count: %w", err)
	}
	ip, err := bin("client_ip")
	if err != nil {
		return r, fmt.Errorf("client_ip: %w", err)
	}
	if a, ok := netip.AddrFromSlice(ip); ok {
		r.Record.ClientIP = a.String()
	}
	sum, err := bin("body_sha256")
	if err != nil {
		return r, fmt.Errorf("body_sha256: %w", err)
	}
	if len(sum) > 0 {
		r.Record.BodySHA256 = fmt.Sprintf("%x", sum)
	}
	body, err := bin("body")
	if err != nil {
		return r, fmt.Errorf("body: %w", err)
	}
	if c["body"] != nil && (len(sum) > 0 || c["seq"] != nil) {
		// As the database's check: a chained row's body always has a digest.
		got := sha256.Sum256(body)
		r.BodyMismatch = !bytes.Equal(got[:], sum)
	}
	if s := c["seq"]; s != nil {
		if r.Seq, err = strconv.ParseUint(*s, 10, 64); err != nil {
			return r, fmt.Errorf("seq: %w", err)
		}
		r.HasSeq = true
	}
	if r.Leaf, err = bin("leaf_hash"); err != nil {
		return r, fmt.Errorf("leaf_hash: %w", err)
	}
	return r, nil
}

// WithArchive is a Source whose rows are the database's and the archive's:
// the months the archive holds are checked row by row (a row missing from
// both is reported), not skipped.
type WithArchive struct {
	Source
	Archive []Row // archived rows in sequence order (from ArchivedRows)
	Months  map[time.Time]bool
}

// Rows merges the database's rows with the archived ones by sequence number.
func (w WithArchive) Rows(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		arch := w.Archive
		for len(arch) > 0 && !arch[0].HasSeq {
			arch = arch[1:]
		}
		for r, err := range w.Source.Rows(ctx) {
			if err != nil {
				yield(r, err)
				return
			}
			for len(arch) > 0 && arch[0].Seq < r.Seq {
				if !yield(arch[0], nil) {
					return
				}
				arch = arch[1:]
			}
			if !yield(r, nil) {
				return
			}
		}
		for _, a := range arch {
			if !yield(a, nil) {
				return
			}
		}
	}
}

// Archived implements Source: a month the archive holds is not skipped.
func (w WithArchive) Archived(t time.Time) bool {
	t = t.UTC()
	if w.Months[time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)] {
		return false
	}
	return w.Source.Archived(t)
}

// rowBefore orders rows by (time, id), as the genesis digest takes them.
func rowBefore(a, b *Row) bool {
	if !a.Record.Time.Equal(b.Record.Time) {
		return a.Record.Time.Before(b.Record.Time)
	}
	return a.Record.ID < b.Record.ID
}

// Unsequenced merges the archive's rows from before the trail began with
// the database's, in (time, id) order.
func (w WithArchive) Unsequenced(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		arch := w.Archive
		for len(arch) > 0 && arch[0].HasSeq {
			arch = arch[1:]
		}
		for r, err := range w.Source.Unsequenced(ctx) {
			if err != nil {
				yield(r, err)
				return
			}
			for len(arch) > 0 && !arch[0].HasSeq && rowBefore(&arch[0], &r) {
				if !yield(arch[0], nil) {
					return
				}
				arch = arch[1:]
			}
			if !yield(r, nil) {
				return
			}
		}
		for _, a := range arch {
			if !a.HasSeq && !yield(a, nil) {
				return
			}
		}
	}
}
