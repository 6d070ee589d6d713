package postgres_test

import (
	"context"
	"testing"
	"time"

	"threatview/alerts"
	"threatview/alerts/internal/pgtest"
)

// TestOutbox_CommitOrder checks that outbox rows of one shard are numbered
// in commit order: a transaction that inserts while another of its shard
// is open waits for it, so a reader that has passed seq n in a shard never
// meets a row of it below n later.
func TestOutbox_CommitOrder(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	ctx := context.Background()
	insert := `INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, threats)
		VALUES (gen_random_uuid(), $1, now(), now(), 'app.startup', '{hooking}') RETURNING seq`
	a, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback(ctx)
	var seqA, seqB int64
	if err := a.QueryRow(ctx, insert, "first").Scan(&seqA); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pool.QueryRow(ctx, insert, "second").Scan(&seqB) }()
	select {
	case err := <-done:
		t.Fatalf("a second insert went ahead while the first transaction was open (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	// While A is open, a reader sees nothing: B waits for A.
	if rows, err := st.Outbox(ctx, alerts.Position{}, 10); err != nil || len(rows) != 0 {
		t.Fatalf("Outbox with one transaction open = %v, %v; want nothing", rows, err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seqB <= seqA {
		t.Fatalf("seq of the later commit %d <= %d", seqB, seqA)
	}
	rows, err := st.Outbox(ctx, alerts.Position{}, 10)
	if err != nil || len(rows) != 2 || rows[0].AppID != "first" || rows[1].AppID != "second" {
		t.Fatalf("Outbox = %+v, %v", rows, err)
	}
	if n, err := st.Fold(ctx, 10); err != nil || n != 2 {
		t.Fatalf("Fold = %d, %v, want 2", n, err)
	}
	if n, err := st.Fold(ctx, 10); err != nil || n != 0 {
		t.Fatalf("second Fold = %d, %v, want 0 (each row counted once)", n, err)
	}
}
