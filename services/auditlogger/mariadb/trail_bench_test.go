package mariadb_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
)

// BenchmarkVerify measures a full verification (rows read from MariaDB,
// leaves from the directory store) in rows/s.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	_, db := audittest.MustDB(b)
	s := mariadb.New(db)
	if _, err := s.LoadMaxPacket(ctx); err != nil {
		b.Fatal(err)
	}
	const n = 300000
	t0 := time.Now().Add(-time.Hour)
	for i := 0; i < n/2000; i++ {
		if _, err := s.Insert(ctx, audittest.Records(2000, t0.Add(time.Duration(i)*3*time.Second))); err != nil {
			b.Fatal(err)
		}
	}
	signer, keys := mustSigner(b)
	store := trail.Dir{Root: b.TempDir()}
	if _, err := (&trail.Checkpointer{DB: mariadb.NewTrail(db), Store: store, Signer: signer}).Once(ctx, time.Now()); err != nil {
		b.Fatal(err)
	}
	runs := 0
	cpu0 := cpuTime()
	for b.Loop() {
		rep, err := trail.Verify(ctx, mariadb.NewTrail(db), trail.StoreReference{Store: store}, keys, trail.Options{})
		if err != nil || !rep.OK || rep.Checked != n {
			b.Fatalf("Verify = %+v, %v", rep, err)
		}
		runs++
	}
	b.ReportMetric(float64(n*runs)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n*runs), "verifier-cpu-µs/row")
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
