package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
)

// TestOpenStore_OutboxShard checks that a processor writes its alerts
// outbox rows as its queue's shard (migration 000023): 0 for the one queue
// of an unsharded deployment, k for <base>.<k>, a drain processor of a
// queue left behind included, through both write paths, and a writer of
// shard k > 0 does not wait while shard 0's holds its outbox lock. Before,
// every row was of one commit order and every shard's writer waited for
// the others' commits.
func TestOpenStore_OutboxShard(t *testing.T) {
	url, pool := pgtest.MustEventsDB(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(23, 1))
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, tc := range []struct {
		queue string
		want  int
	}{
		{"/queue/threatview.events", 0},
		{"/queue/threatview.events.1", 1},
		{"/queue/threatview.events.0", 0},
		{"/queue/threatview.events.11", 11},
	} {
		t.Run(tc.queue, func(t *testing.T) {
			cfg := Config{DatabaseURL: url, DBMaxConns: 2, Queue: tc.queue, Outbox: true}
			store, err := openStore(ctx, &cfg)
			if err != nil {
				t.Fatalf("openStore(%q): %v", tc.queue, err)
			}
			defer store.Close()
			if tc.want != 0 {
				// Shard 0's writer holds its outbox lock open: another
				// shard's writes do not wait for it.
				holder, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer holder.Rollback(context.Background()) //nolint:errcheck
				if _, err := holder.Exec(ctx, "SELECT pg_advisory_xact_lock(128051789459298)"); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			batch := pgtest.Event(r, now, time.Minute)
			batch.Threats = json.RawMessage(`["hooking"]`)
			if _, err := store.WriteBatch(wctx, []wire.Event{batch}); err != nil {
				t.Fatalf("WriteBatch: %v", err)
			}
			req := pgtest.Event(r, now, 0)
			req.Threats = json.RawMessage(`["root"]`)
			if _, refused, err := store.WriteRequests(wctx, [][]wire.Event{{req}}); err != nil || len(refused) != 0 {
				t.Fatalf("WriteRequests = %v, %v", refused, err)
			}
			for _, e := range []wire.Event{batch, req} {
				if n := pgtest.Count(t, pool, "SELECT count(*) FROM alerts.outbox WHERE event_id = $1 AND shard = $2", e.ID, tc.want); n != 1 {
					t.Fatalf("outbox rows of %s of shard %d = %d, want 1", e.ID, tc.want, n)
				}
			}
		})
	}
}

// TestConfig_Shard: the shard is the queue's last dotted number, 0 without
// one; a number no shard can have is refused by name.
func TestConfig_Shard(t *testing.T) {
	for _, tc := range []struct {
		queue string
		want  int
		ok    bool
	}{
		{"/queue/threatview.events", 0, true},
		{"/queue/threatview.events.7", 7, true},
		{"/queue/test.events-1a2b.3", 3, true},
		{"/queue/threatview.events.", 0, true},
		{"/queue/threatview.events.x1", 0, true},
		{"/queue/threatview.events.32768", 0, false},
	} {
		c := Config{Queue: tc.queue}
		got, err := c.Shard()
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("Shard(%q) = %d, %v; want %d, ok %v", tc.queue, got, err, tc.want, tc.ok)
		}
	}
}
