package postgres_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/alerts"
	"threatview/alerts/forward"
	"threatview/alerts/internal/pgtest"
)

// insertOne writes one outbox row in tx and returns its seq and event id.
func insertOne(t *testing.T, tx pgx.Tx, app string) (int64, string) {
	t.Helper()
	var seq int64
	var id string
	if err := tx.QueryRow(context.Background(), `INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, threats)
		VALUES (gen_random_uuid(), $1, now(), now(), 'app.startup', '{hooking}') RETURNING seq, event_id::text`, app).Scan(&seq, &id); err != nil {
		t.Fatalf("insert outbox row of %s: %v", app, err)
	}
	return seq, id
}

// count runs a query of one number.
func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// sentSink counts the events a forwarder sent, by id.
type sentSink struct {
	mu   sync.Mutex
	sent map[string]int
}

func (s *sentSink) Send(_ context.Context, events []alerts.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range events {
		s.sent[e.ID]++
	}
	return nil
}

func (s *sentSink) Close() error { return nil }

func (s *sentSink) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[id]
}

func (s *sentSink) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.sent))
	for id, n := range s.sent {
		out[id] = n
	}
	return out
}

// TestOutbox_ShardsCommitApart: two events shards' writers at once, the one
// that draws the smaller seq committing last. Shard 1's writer does not
// wait for shard 0's open transaction (one lock per shard, migration
// 000023: before, one lock for all made it wait), and a forwarder and the
// minute counter, reading between the two commits, each see both rows
// exactly once: a reader that followed the outbox by one seq would pass
// shard 0's row, committed after a larger seq was read.
func TestOutbox_ShardsCommitApart(t *testing.T) {
	url, st, pool := pgtest.MustStore(t)
	ctx := context.Background()
	shard0, shard1 := pgtest.ShardPool(t, url, 0), pgtest.ShardPool(t, url, 1)

	f := pgtest.Forwarder(t, st)
	sink := &sentSink{sent: map[string]int{}}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cfg := forward.Config{Batch: 100, Poll: 20 * time.Millisecond, Refresh: 50 * time.Millisecond,
			Sink: func(*alerts.Forwarder, forward.Config) (alerts.Sink, error) { return sink, nil }}
		_ = forward.Supervise(rctx, st, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); wg.Wait() }()

	a, err := shard0.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback(ctx)
	seqA, idA := insertOne(t, a, "app-shard0")

	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	b, err := shard1.Begin(bctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Rollback(ctx)
	if _, err := b.Exec(bctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
		t.Fatal(err)
	}
	var seqB int64
	var idB string
	if err := b.QueryRow(bctx, `INSERT INTO alerts.outbox (event_id, app_id, received_at, occurred_at, type, threats)
		VALUES (gen_random_uuid(), 'app-shard1', now(), now(), 'app.startup', '{hooking}') RETURNING seq, event_id::text`).Scan(&seqB, &idB); err != nil {
		t.Fatalf("shard 1's insert while shard 0's transaction is open: %v; want it not to wait for shard 0", err)
	}
	if err := b.Commit(bctx); err != nil {
		t.Fatal(err)
	}
	if seqB <= seqA {
		t.Fatalf("seq of shard 1's row %d <= shard 0's %d: the test needs the later commit to hold the larger seq", seqB, seqA)
	}

	waitSent(t, sink, idB)
	if n, err := st.Fold(ctx, 10); err != nil || n != 1 {
		t.Fatalf("Fold with shard 0's transaction open = %d, %v; want shard 1's row", n, err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitSent(t, sink, idA)
	if n, err := st.Fold(ctx, 10); err != nil || n != 1 {
		t.Fatalf("Fold after shard 0's commit = %d, %v; want its row, below the seq already read", n, err)
	}
	if n, err := st.Fold(ctx, 10); err != nil || n != 0 {
		t.Fatalf("third Fold = %d, %v; want 0 (each row counted once)", n, err)
	}
	time.Sleep(200 * time.Millisecond) // more polls: nothing is sent again
	if sent := sink.snapshot(); len(sent) != 2 || sent[idA] != 1 || sent[idB] != 1 {
		t.Fatalf("forwarder sent %v; want %s and %s once each", sent, idA, idB)
	}
	if n := count(t, pool, `SELECT coalesce(sum(count), 0) FROM alerts.threat_minutes`); n != 2 {
		t.Fatalf("minute counts sum to %d, want 2", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM alerts.outbox WHERE (shard, seq) IN ((0, $1), (1, $2))`, seqA, seqB); n != 2 {
		t.Fatalf("rows with their writers' shards = %d, want 2", n)
	}
	if s, err := st.ForwarderStatus(ctx, f.ID); err != nil || s.Pending != 0 || s.Delivered != 2 {
		t.Fatalf("ForwarderStatus = %+v, %v; want 2 delivered, none pending", s, err)
	}
}

func waitSent(t *testing.T, sink *sentSink, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for sink.count(id) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the forwarder did not send %s", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStore_ShardsPruneAndSkip: pruning keeps each shard's rows a cursor
// has not passed in that shard, and the backlog bound passes the oldest
// rows over all shards, each shard's cursor moving to the last row it
// passed there.
func TestStore_ShardsPruneAndSkip(t *testing.T) {
	url, st, pool := pgtest.MustStore(t)
	ctx := context.Background()
	shard0, shard1 := pgtest.ShardPool(t, url, 0), pgtest.ShardPool(t, url, 1)
	f := pgtest.Forwarder(t, st)
	old := time.Now().Add(-time.Hour)
	pgtest.Insert(t, shard0, 1, 0, 10, "app-a", old, "hooking")
	pgtest.Insert(t, shard1, 2, 0, 10, "app-b", old, "root")
	pgtest.Insert(t, shard0, 1, 10, 10, "app-a", old, "hooking")
	if n, err := st.Fold(ctx, 100); err != nil || n != 30 {
		t.Fatalf("Fold = %d, %v; want 30", n, err)
	}
	pos, err := st.Cursor(ctx, forward.CursorName(f.ID))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Outbox(ctx, pos, 15)
	if err != nil || len(rows) != 15 {
		t.Fatalf("Outbox = %d rows, %v; want 15", len(rows), err)
	}
	if err := st.Delivered(ctx, f.ID, pos.After(rows), 15); err != nil {
		t.Fatal(err)
	}
	// The 15 oldest: shard 0's first 10, shard 1's first 5.
	if n, err := st.Prune(ctx, time.Minute, time.Hour); err != nil || n != 15 {
		t.Fatalf("Prune = %d, %v; want the 15 rows both cursors passed", n, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM alerts.outbox WHERE shard = 1`); n != 5 {
		t.Fatalf("shard 1 keeps %d rows after Prune, want the 5 the forwarder has not read", n)
	}

	next, skipped, err := st.Skip(ctx, f.ID, 5)
	if err != nil || skipped != 10 {
		t.Fatalf("Skip = %d, %v; want 10 of 15 passed", skipped, err)
	}
	rest, err := st.Outbox(ctx, next, 100)
	if err != nil || len(rest) != 5 {
		t.Fatalf("Outbox after Skip = %d rows, %v; want 5", len(rest), err)
	}
	var top int64
	if err := pool.QueryRow(ctx, `SELECT min(seq) FROM (SELECT seq FROM alerts.outbox ORDER BY seq DESC LIMIT 5) s`).Scan(&top); err != nil {
		t.Fatal(err)
	}
	if rest[0].Seq != top {
		t.Fatalf("Outbox after Skip starts at seq %d, want %d (the newest 5 kept)", rest[0].Seq, top)
	}
	stored, err := st.Cursor(ctx, forward.CursorName(f.ID))
	if err != nil || len(stored.Shards) != len(next.Shards) {
		t.Fatalf("stored cursor %+v, %v; want %+v", stored, err, next)
	}
	for k, seq := range next.Shards {
		if stored.In(k) != seq {
			t.Fatalf("stored cursor %+v, want %+v", stored, next)
		}
	}
	if s, err := st.ForwarderStatus(ctx, f.ID); err != nil || s.Pending != 5 || s.Skipped != 10 {
		t.Fatalf("ForwarderStatus = %+v, %v; want 5 pending, 10 skipped", s, err)
	}
}
