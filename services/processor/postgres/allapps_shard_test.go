package postgres_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

// TestStore_AllAppsRowsPerShard: the rollups over all apps keep a row per
// shard (migration events 000024), so shard 1's writer does not wait for
// shard 0's commit on the rows they share (the same hour, OS and device
// model from two apps), and every rollup still equals count(*) when its
// key's rows are summed. Before 000024 shard 1's write waited on shard 0's
// row lock until shard 0 committed (here: until the deadline). The events
// carry no threat, device or user and the two apps' countries differ, so
// no other row over all apps (the outbox's commit-order lock, the
// investigation summaries) is shared between the two writes.
func TestStore_AllAppsRowsPerShard(t *testing.T) {
	dbURL, pool := pgtest.MustEventsDB(t)
	ctx := context.Background()
	open := func(shard int) *postgres.Store {
		t.Helper()
		s, err := postgres.OpenShard(ctx, dbURL, 2, shard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	s0, s1 := open(0), open(1)
	r := rand.New(rand.NewPCG(3, 4))
	now := time.Now().UTC()
	batch := func(app, country string, n int) []wire.Event {
		events := make([]wire.Event, n)
		for i := range events {
			e := pgtest.Event(r, now, 0)
			e.App.ID, e.Country, e.Device.ID, e.Threats = app, country, "", json.RawMessage(`[]`)
			e.Device.OS, e.Device.Manufacturer, e.Device.Model = "Android", "Google", "Pixel 8"
			events[i] = e
		}
		return events
	}
	// The device model exists before the two writes meet (a new model's
	// insert would make the second wait on the first's key).
	if _, err := s0.WriteBatch(ctx, batch("app-a", "DE", 1)); err != nil {
		t.Fatal(err)
	}

	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	s0.BeforeCommit(func() { close(held); <-release })
	go func() {
		_, err := s0.WriteBatch(ctx, batch("app-a", "DE", 50))
		done <- err
	}()
	<-held
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res, err := s1.WriteBatch(wctx, batch("app-b", "FR", 50))
	cancel()
	close(release)
	if err0 := <-done; err0 != nil {
		t.Fatalf("shard 0's write: %v", err0)
	}
	if err != nil {
		t.Fatalf("shard 1's write while shard 0's was in flight: %v; want it stored without waiting for shard 0's commit", err)
	}
	if res.Stored != 50 {
		t.Fatalf("shard 1 stored %d events, want 50", res.Stored)
	}

	// Threat events afterwards, so the threat rollups are checked too.
	threats := batch("app-b", "FR", 5)
	for i := range threats {
		threats[i].Threats = json.RawMessage(`["root"]`)
	}
	if _, err := s1.WriteBatch(ctx, threats); err != nil {
		t.Fatal(err)
	}
	pgtest.AssertRollupsExact(t, pool, 106)
	rows, err := pool.Query(ctx, `SELECT shard, count FROM facts.all_apps_events_by_os_per_hour WHERE os = 'Android' ORDER BY shard`)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]int64
	for rows.Next() {
		var shard, n int64
		if err := rows.Scan(&shard, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, [2]int64{shard, n})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int64{{0, 51}, {1, 55}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("all_apps_events_by_os_per_hour rows (shard, count) = %v, want %v", got, want)
	}
}
