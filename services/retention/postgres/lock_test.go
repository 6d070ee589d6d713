package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/platform/testenv"
	"threatview/retention"
)

// TestSource_Lock: a second job meets ErrBusy while the first holds the
// lock, the lock is the one older releases take (hashtext of lockKey), and
// holding it takes none of the pool's connections: a long-running service's
// pool of two stays whole for the job.
func TestSource_Lock(t *testing.T) {
	url := testenv.MustPostgres(t)
	ctx := context.Background()
	s, err := OpenLazy(url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	plain, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)

	unlock, err := s.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock = %v", err)
	}
	unlocked := false
	defer func() {
		if !unlocked {
			unlock() // before the pools close, should the test fail
		}
	}()
	if _, err := other.Lock(ctx); !errors.Is(err, retention.ErrBusy) {
		t.Errorf("second Lock while held = %v, want ErrBusy", err)
	}
	var free bool
	if err := plain.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext($1))", lockKey).Scan(&free); err != nil || free {
		t.Errorf("hashtext(%q) taken elsewhere while held = %v, %v, want held", lockKey, free, err)
	}

	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var conns []*pgxpool.Conn
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(actx)
		if err != nil {
			for _, c := range conns {
				c.Release()
			}
			t.Fatalf("pool connection %d of %d while the lock is held: %v", len(conns)+1, s.pool.Config().MaxConns, err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}

	unlock()
	unlocked = true
	unlock2, err := other.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after unlock = %v", err)
	}
	unlock2()
}
