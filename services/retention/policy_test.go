package retention

import (
	"testing"
	"time"
)

func month(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }

func part(y int, m time.Month) Partition {
	lo := month(y, m)
	return Partition{Table: "events.events", Month: lo, From: lo, To: lo.AddDate(0, 1, 0)}
}

func TestDroppable(t *testing.T) {
	tests := []struct {
		name   string
		now    time.Time
		months int
		p      Partition
		want   bool
	}{
		{"retention 1 keeps current month", time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC), 1, part(2026, 11), false},
		{"retention 1 keeps previous month", time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC), 1, part(2026, 10), false},
		{"retention 1 drops two months back", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), 1, part(2026, 9), true},
		{"retention 1 drops older", time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), 1, part(2025, 1), true},
		{"retention 1 never drops the future", time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), 1, part(2027, 1), false},
		{"retention 3 keeps three months back", time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), 3, part(2026, 8), false},
		{"retention 3 drops four months back", time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), 3, part(2026, 7), true},
		{"year boundary", time.Date(2027, 1, 10, 0, 0, 0, 0, time.UTC), 1, part(2026, 11), true},
		{"year boundary keeps December", time.Date(2027, 1, 10, 0, 0, 0, 0, time.UTC), 1, part(2026, 12), false},
		{"end of March does not skip February", time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC), 1, part(2026, 2), false},
		{"non-UTC now uses the UTC month", time.Date(2026, 12, 1, 0, 30, 0, 0, time.FixedZone("X", 3600)), 1, part(2026, 9), true},
		{"zero retention acts as 1", time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), 0, part(2026, 10), false},
		{"catch-all never", time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), 1, Partition{Name: "pmax"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Droppable(tt.p, tt.now, tt.months); got != tt.want {
				t.Errorf("Droppable(%s, %s, %d) = %v, want %v", MonthString(tt.p.Month), tt.now, tt.months, got, tt.want)
			}
		})
	}
}

func TestFinished(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		p    Partition
		want bool
	}{
		{part(2026, 10), true},
		{part(2026, 11), false},
		{part(2026, 12), false},
		{Partition{}, false},
	}
	for _, tt := range tests {
		if got := Finished(tt.p, now); got != tt.want {
			t.Errorf("Finished(%s) = %v, want %v", MonthString(tt.p.Month), got, tt.want)
		}
	}
}
