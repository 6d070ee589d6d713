package retention

import "time"

// DropCutoff returns the upper bound at or below which a partition may be
// dropped with a retention of months (≥ 1) at now: the start of month M-months
// when now is in month M. A partition whose upper bound is at or before the
// cutoff holds only rows more than months months old, so the current month and
// the months months before it are always kept.
func DropCutoff(now time.Time, months int) time.Time {
	if months < 1 {
		months = 1
	}
	return MonthStart(now).AddDate(0, -months, 0)
}

// Droppable reports whether p may be dropped with retention months at now.
// Partitions without an upper bound (catch-alls) never are.
func Droppable(p Partition, now time.Time, months int) bool {
	return !p.To.IsZero() && !p.To.After(DropCutoff(now, months))
}

// Finished reports whether every row p can hold lies before the current
// month, so no new row can arrive in it and it can be archived.
func Finished(p Partition, now time.Time) bool {
	return !p.To.IsZero() && !p.To.After(MonthStart(now))
}
