package mariadb_test

import (
	"context"
	"os"
	"strconv"
	"strings"
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
	db0 := mariadbCPU(b)
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
	// The server's CPU includes whatever else the shared MariaDB serves
	// meanwhile: an upper bound.
	b.ReportMetric(float64((mariadbCPU(b)-db0).Microseconds())/float64(n*runs), "mariadb-cpu-µs/row")
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mariadbCPU is the user and system CPU time of the local mariadbd (0 when
// it is not on this machine).
func mariadbCPU(tb testing.TB) time.Duration {
	tb.Helper()
	dirs, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, d := range dirs {
		comm, err := os.ReadFile("/proc/" + d.Name() + "/comm")
		if err != nil || (strings.TrimSpace(string(comm)) != "mariadbd" && strings.TrimSpace(string(comm)) != "mysqld") {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
	}
	return total
}
