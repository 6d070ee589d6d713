package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Cleaner drops the partitions of one Source older than Months months.
//
// With RequireArchive it drops a partition only when the database holds a
// verified archive record for it whose row count equals the partition's
// current count and, when Store is set, whose manifest is still in the store
// with the recorded checksum. Partitions failing that are kept and named in
// the returned error (ErrUnarchived); the others are still dropped, since
// their archives are proven.
type Cleaner struct {
	Src            Source
	Months         int
	RequireArchive bool
	Store          Store // optional: also check each archive's manifest
	DryRun         bool
	Log            *slog.Logger
	Now            func() time.Time
	// BeforeDrop, when set, is called between a partition's archive check and
	// its drop; the race test writes a row there.
	BeforeDrop func(p Partition)
}

// CleanupResult lists what a cleanup run did (or in a dry run, would do).
type CleanupResult struct {
	Dropped []Partition
	Refused []string // "table/partition: reason"
	Summary Summary
}

// Run drops every droppable partition, oldest first.
func (c *Cleaner) Run(ctx context.Context) (CleanupResult, error) {
	start := time.Now()
	var res CleanupResult
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	unlock, err := c.Src.Lock(ctx)
	if err != nil {
		return res, err
	}
	defer unlock()
	parts, err := c.Src.Partitions(ctx)
	if err != nil {
		return res, err
	}
	cutoff := DropCutoff(now, c.Months)
	c.Log.Info("cleanup started", "database", c.Src.Name(), "retention_months", c.Months,
		"drop_before", cutoff.Format(time.DateOnly), "require_archive", c.RequireArchive, "dry_run", c.DryRun)
	for _, p := range parts {
		if !Droppable(p, now, c.Months) {
			continue
		}
		log := c.Log.With("table", p.Table, "partition", p.Name, "month", MonthString(p.Month))
		var rows int64 = -1
		if c.RequireArchive {
			n, reason, err := c.archived(ctx, p)
			if err != nil {
				return res, err
			}
			if reason != "" {
				log.Error("partition not dropped", "reason", reason)
				res.Refused = append(res.Refused, p.Table+"/"+p.Name+": "+reason)
				continue
			}
			rows = n
		}
		if c.DryRun {
			log.Info("would drop partition", "bytes", p.Bytes, "rows", rows)
		} else {
			if c.BeforeDrop != nil {
				c.BeforeDrop(p)
			}
			var err error
			if rows >= 0 {
				// Recount under the lock that drops: a row committed since the
				// check above would otherwise go unarchived.
				err = c.Src.DropCounted(ctx, p, rows)
			} else {
				err = c.Src.Drop(ctx, p)
			}
			if errors.Is(err, ErrChanged) {
				reason := fmt.Sprintf("%v: re-archive it (archiver --force --table %s --month %s)", err, p.Table, MonthString(p.Month))
				log.Error("partition not dropped", "reason", reason)
				res.Refused = append(res.Refused, p.Table+"/"+p.Name+": "+reason)
				continue
			}
			if err != nil {
				return res, err
			}
			log.Info("partition dropped", "bytes", p.Bytes, "rows", rows)
		}
		res.Dropped = append(res.Dropped, p)
		res.Summary.Partitions++
		res.Summary.Bytes += p.Bytes
		if rows > 0 {
			res.Summary.Rows += rows
		}
	}
	res.Summary.Seconds = time.Since(start).Seconds()
	if len(res.Refused) > 0 {
		return res, fmt.Errorf("%w: %s", ErrUnarchived, strings.Join(res.Refused, "; "))
	}
	return res, nil
}

// archived returns p's row count and "" when p has a usable verified
// archive, or the reason it has none.
func (c *Cleaner) archived(ctx context.Context, p Partition) (int64, string, error) {
	rec, err := c.Src.Record(ctx, p.Table, p.Month)
	if errors.Is(err, ErrNotFound) {
		return 0, "no verified archive", nil
	}
	if err != nil {
		return 0, "", err
	}
	if rec.VerifiedAt.IsZero() {
		return 0, "archive not verified", nil
	}
	n, err := c.Src.Count(ctx, p)
	if err != nil {
		return 0, "", err
	}
	if n != rec.Rows {
		return 0, fmt.Sprintf("partition has %d rows but its archive %d: re-archive it (archiver --force --table %s --month %s)", n, rec.Rows, p.Table, MonthString(p.Month)), nil
	}
	if c.Store != nil {
		// The version the record names: after --force the month has several.
		prefix := Prefix(p.Table, p.Month)
		_, m, err := FindManifest(ctx, c.Store, p.Table, p.Month, rec.ManifestSHA256)
		switch {
		case errors.Is(err, ErrNotFound):
			return 0, "archive manifest differs from the verified one at " + c.Store.Location(prefix), nil
		case err != nil:
			return 0, "archive manifest unreadable: " + err.Error(), nil
		case m.Rows != rec.Rows:
			return 0, "archive manifest differs from the verified one at " + c.Store.Location(prefix), nil
		}
	}
	return n, "", nil
}
