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
	"threatview/processor/postgres"
)

// BenchmarkStore_Drain measures the write path as a drain meets it:
// THREATVIEW_DRAIN_BENCH_EVENTS events (default 100,000; ~540 B rows,
// every one with threats or not as pgtest.Event makes them) in batches of
// 2,000 into a fresh database, each batch one transaction, rollups exact
// (exact at every commit). It reports events/s and the CPU per event of PostgreSQL
// (the database's backends and its WAL writer, checkpointer and background
// writer, read from /proc: the server must run on this machine) and of this
// process (the store's encoding; the message decode is not in it), with
// time-ordered (v7) and random (v4) ids, from eight apps; and with two
// shards (issue 38): the events split by wire.EventsShard as the collector
// routes them, each shard's batches written by its own writer at the same time, as
// two processors on two queues would, each with its shard's outbox
// numbering (v7 ids).
func BenchmarkStore_Drain(b *testing.B) {
	total := 100_000
	if v, err := strconv.Atoi(os.Getenv("THREATVIEW_DRAIN_BENCH_EVENTS")); err == nil && v > 0 {
		total = v
	}
	const size = 2000
	for _, bc := range []struct {
		ids    string
		shards int
	}{{"v7", 1}, {"v4", 1}, {"v7", 2}} {
		name := "ids=" + bc.ids
		if bc.shards > 1 {
			name += fmt.Sprintf("/shards=%d", bc.shards)
		}
		b.Run(name, func(b *testing.B) {
			dbURL, pool := pgtest.MustEventsDB(b)
			// One store per shard, as one processor per queue: each
			// writes its own shard's outbox rows under its own
			// commit-order lock (migration 000023).
			stores := make([]*postgres.Store, bc.shards)
			for k := range stores {
				s, err := postgres.OpenShard(context.Background(), dbURL, 4, k)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(s.Close)
				stores[k] = s
			}
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
				// Each shard's events, in batches of size as its queue
				// would give them.
				streams := make([][][]wire.Event, bc.shards)
				open := make([][]wire.Event, bc.shards)
				for n := 0; n < total; n++ {
					at := now.Add(time.Duration(n) * time.Microsecond)
					ev := pgtest.Event(r, at, time.Hour)
					if bc.ids == "v7" {
						ev.ID = pgtest.UUIDv7(r, at)
					}
					ev.App.ID = fmt.Sprintf("app-%d", r.IntN(8))
					k := wire.EventsShard(ev.App.ID, bc.shards)
					if open[k] = append(open[k], ev); len(open[k]) == size {
						streams[k], open[k] = append(streams[k], open[k]), nil
					}
				}
				for k := range open {
					if len(open[k]) > 0 {
						streams[k] = append(streams[k], open[k])
					}
				}
				pg0, _ := pgtest.BackendCPU(db)
				self0 := selfCPU()
				start := time.Now()
				b.StartTimer()
				stored := make([]int, bc.shards)
				errs := make(chan error, bc.shards)
				for k := range streams {
					go func() {
						for _, batch := range streams[k] {
							// A model new to both writers at once fails
							// one of them, retried as the consumer does.
							res, err := stores[k].WriteBatch(ctx, batch)
							for try := 0; err != nil && try < 3; try++ {
								res, err = stores[k].WriteBatch(ctx, batch)
							}
							if err != nil {
								errs <- fmt.Errorf("shard %d: WriteBatch: %w", k, err)
								return
							}
							stored[k] += res.Stored
						}
						errs <- nil
					}()
				}
				for range streams {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				wall := time.Since(start)
				pg1, ok := pgtest.BackendCPU(db)
				self := selfCPU() - self0
				all := 0
				for _, n := range stored {
					all += n
				}
				b.ReportMetric(float64(all)/wall.Seconds(), "events/s")
				if ok {
					b.ReportMetric(float64((pg1-pg0).Microseconds())/float64(all), "pg-µs/event")
				}
				b.ReportMetric(float64(self.Microseconds())/float64(all), "proc-µs/event")
				b.Logf("%d events stored in %s, per shard %v (%s)", all, wall.Round(time.Millisecond), stored, loadavg())
				if bc.shards > 1 {
					pgtest.AssertRollupsExact(b, pool, all)
				}
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
