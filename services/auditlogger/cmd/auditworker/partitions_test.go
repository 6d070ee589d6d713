package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/migrations"
)

// TestMaintainPartitions_Gauge checks that the partitions-ahead gauge follows
// what information_schema holds: the configured months after upkeep, fewer
// once a partition ahead is dropped.
func TestMaintainPartitions_Gauge(t *testing.T) {
	_, db := audittest.MustDB(t)
	ctx := context.Background()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_partitions_ahead_months"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	maintainPartitions(ctx, db, 4, gauge, log)()
	if got := testutil.ToFloat64(gauge); got != 4 {
		t.Fatalf("gauge after upkeep(4) = %v, want 4", got)
	}

	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	drop := func(month time.Time) {
		t.Helper()
		// sql: test DDL; the name is digits from AuditPartitionName.
		if _, err := db.ExecContext(ctx, "ALTER TABLE audit_events DROP PARTITION "+migrations.AuditPartitionName(month)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() int {
		t.Helper()
		n, err := mariadb.PartitionsAhead(ctx, db, now)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	drop(first.AddDate(0, 3, 0))
	if got := read(); got != 2 {
		t.Fatalf("PartitionsAhead without month+3 = %d, want 2", got)
	}
	drop(first.AddDate(0, 1, 0))
	if got := read(); got != 0 {
		t.Fatalf("PartitionsAhead without next month = %d, want 0", got)
	}
}
