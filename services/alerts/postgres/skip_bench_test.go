package postgres_test

import (
	"context"
	"testing"
	"time"

	"threatview/alerts/internal/pgtest"
)

// BenchmarkSkip measures the backlog bound on an outbox of b.N + 1,000
// rows after a failing forwarder's cursor, with a bound of b.N: the first
// Skip passes 1,000 rows (the edge is b.N below the newest number, and
// only the rows behind it are counted, by index range), each later one
// finds none behind the edge. It
// reports both calls' wall time (the database's: the alerts process only
// waits); Skip runs only after a failed batch or a failed start.
//
//	cd services/alerts && go test -run '^$' -bench Skip -benchtime 1000000x ./postgres/
func BenchmarkSkip(b *testing.B) {
	_, st, pool := pgtest.MustStore(b)
	ctx := context.Background()
	f := pgtest.Forwarder(b, st)
	pgtest.Insert(b, pool, 1, 0, b.N+1000, "app-a", time.Now(), "hooking")
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE alerts.outbox`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	_, n, err := st.Skip(ctx, f.ID, int64(b.N))
	first := time.Since(start)
	if err != nil || n != 1000 {
		b.Fatalf("Skip = %d, %v; want 1000 skipped", n, err)
	}
	start = time.Now()
	if _, n, err = st.Skip(ctx, f.ID, int64(b.N)); err != nil || n != 0 {
		b.Fatalf("second Skip = %d, %v; want 0", n, err)
	}
	again := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(first.Milliseconds()), "ms-first-skip")
	b.ReportMetric(float64(again.Microseconds()), "us-within-bound")
	b.ReportMetric(0, "ns/op")
}
