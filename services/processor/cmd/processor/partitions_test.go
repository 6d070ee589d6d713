package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

// TestMaintainPartitions_Gauge checks that the partitions-ahead gauge follows
// what the catalog holds: the configured months after upkeep, fewer once a
// partition ahead is dropped.
func TestMaintainPartitions_Gauge(t *testing.T) {
	url, pool := pgtest.MustEventsDB(t)
	ctx := context.Background()
	store, err := postgres.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_partitions_ahead_months"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The migration keeps 3 months ahead; upkeep with 5 must show 5.
	maintainPartitions(ctx, store, 5, gauge, log)
	if got := testutil.ToFloat64(gauge); got != 5 {
		t.Fatalf("gauge after upkeep(5) = %v, want 5", got)
	}

	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	drop := func(table string, month time.Time) {
		t.Helper()
		if _, err := pool.Exec(ctx, "DROP TABLE "+table+month.Format("_y2006m01")); err != nil {
			t.Fatal(err)
		}
	}
	read := func() int {
		t.Helper()
		n, err := store.PartitionsAhead(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	drop("facts.facts", first.AddDate(0, 3, 0))
	if got := read(); got != 2 {
		t.Fatalf("PartitionsAhead without facts' month+3 = %d, want 2", got)
	}
	drop("events.events", first.AddDate(0, 1, 0))
	if got := read(); got != 0 {
		t.Fatalf("PartitionsAhead without events' next month = %d, want 0", got)
	}
	// Upkeep recreates them and the gauge comes back.
	maintainPartitions(ctx, store, 5, gauge, log)
	if got := testutil.ToFloat64(gauge); got != 5 {
		t.Fatalf("gauge after second upkeep = %v, want 5", got)
	}
}
