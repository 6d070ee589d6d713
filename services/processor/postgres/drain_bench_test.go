package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
)

// BenchmarkStore_Drain measures the write path as a drain meets it:
// THREATVIEW_DRAIN_BENCH_EVENTS events (default 100,000; ~540 B rows,
// every one with threats or not as pgtest.Event makes them) in batches of
// 2,000 into a fresh database, each batch one transaction, rollups exact
// (exact at every commit). It reports events/s and the CPU per event of PostgreSQL
// (the database's backends and its WAL writer, checkpointer and background
// writer, read from /proc: the server must run on this machine) and of this
// process (the store's encoding; the message decode is not in it), with
// time-ordered (v7) and random (v4) ids.
func BenchmarkStore_Drain(b *testing.B) {
	total := 100_000
	if v, err := strconv.Atoi(os.Getenv("THREATVIEW_DRAIN_BENCH_EVENTS")); err == nil && v > 0 {
		total = v
	}
	const size = 2000
	for _, ids := range []string{"v7", "v4"} {
		b.Run("ids="+ids, func(b *testing.B) {
			s, pool := mustStore(b)
			u, err := url.Parse(pool.Config().ConnString())
			if err != nil {
				b.Fatal(err)
			}
			db := strings.TrimPrefix(u.Path, "/")
			ctx := context.Background()
			r := rand.New(rand.NewPCG(7, 8))
			for b.Loop() {
				b.StopTimer()
				now := time.Now().UTC()
				batches := make([][]wire.Event, 0, total/size+1)
				for n := 0; n < total; n += size {
					batch := make([]wire.Event, min(size, total-n))
					for i := range batch {
						at := now.Add(time.Duration(n+i) * time.Microsecond)
						batch[i] = pgtest.Event(r, at, time.Hour)
						if ids == "v7" {
							batch[i].ID = pgtest.UUIDv7(r, at)
						}
					}
					batches = append(batches, batch)
				}
				pg0, _ := pgtest.BackendCPU(db)
				self0 := selfCPU()
				start := time.Now()
				b.StartTimer()
				stored := 0
				for _, batch := range batches {
					res, err := s.WriteBatch(ctx, batch)
					if err != nil {
						b.Fatalf("WriteBatch: %v", err)
					}
					stored += res.Stored
				}
				b.StopTimer()
				wall := time.Since(start)
				pg1, ok := pgtest.BackendCPU(db)
				self := selfCPU() - self0
				b.ReportMetric(float64(stored)/wall.Seconds(), "events/s")
				if ok {
					b.ReportMetric(float64((pg1-pg0).Microseconds())/float64(stored), "pg-µs/event")
				}
				b.ReportMetric(float64(self.Microseconds())/float64(stored), "proc-µs/event")
				b.Logf("%d events stored in %s (%s)", stored, wall.Round(time.Millisecond), loadavg())
				b.StartTimer()
			}
		})
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(string(b))
	return fmt.Sprintf("load average %s %s %s", f[0], f[1], f[2])
}
