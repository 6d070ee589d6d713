package privacy_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/testenv"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/privacy"
)

// TestRunner_LockLost: two runners, one holding the runner lock. When the
// holder's lock session is terminated (a failover, an administrator, a
// network cut the server saw), that runner learns it lost the lock and
// stops, and exactly one runner holds the lock again.
func TestRunner_LockLost(t *testing.T) {
	url, _ := retentiontest.Postgres(t)
	pool := open(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	start := func() *testenv.SyncBuffer {
		out := &testenv.SyncBuffer{}
		r := privacy.NewRunner(privacy.NewPG(pool), nil, privacy.RunnerConfig{BatchRows: 100,
			Poll: 50 * time.Millisecond}, privacy.NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewJSONHandler(out, nil)))
		wg.Go(func() { _ = r.Run(ctx, pool) })
		return out
	}
	holder := func() (pid int) {
		err := pool.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return pid
	}
	a := start()
	testenv.MustPing(t, 10*time.Second, "the first runner's lock", func() error {
		if holder() == 0 {
			return errors.New("no session holds it")
		}
		return nil
	})
	first := holder()
	b := start()
	time.Sleep(200 * time.Millisecond)
	if p := holder(); p != first {
		t.Fatalf("lock holder %d, want still %d", p, first)
	}

	var ok bool
	if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", first).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
	}
	testenv.MustPing(t, 10*time.Second, "the first runner learning it lost the lock", func() error {
		if !strings.Contains(a.String(), "erasure runner lock lost") {
			return errors.New("not in its log")
		}
		return nil
	})
	testenv.MustPing(t, 10*time.Second, "a runner holding the lock again", func() error {
		if p := holder(); p == 0 || p == first {
			return errors.New("no new holder")
		}
		return nil
	})
	if n := strings.Count(a.String(), "erasure runner lock acquired") + strings.Count(b.String(), "erasure runner lock acquired"); n != 2 {
		t.Errorf("the lock was taken %d times, want 2 (the first runner's, then one after the loss)\n%s\n%s", n, a.String(), b.String())
	}
}
