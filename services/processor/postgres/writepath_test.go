package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor"
	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

// TestThreatTypes_MatchesSQL holds the writer's threat types (computed once
// an event, in Go) to facts.threat_types, which the rollups of existing rows
// and the investigation migration were built with.
func TestThreatTypes_MatchesSQL(t *testing.T) {
	_, pool := pgtest.MustEventsDB(t)
	docs := []string{
		``, `null`, `[]`, `{}`, `"root"`, `42`, `["root"]`, `["root","root"]`, `["b","a","B","á","a"]`,
		`[{"type":"root","severity":"high"}]`, `[{"Type":"root"}]`, `[{"type":"a","type":"b"}]`,
		`[{"type":"a","type":7}]`, `[{"type":7,"type":"a"}]`, `[{"type":null}]`, `[{"type":""}]`, `[""]`,
		`[{"severity":"low"},42,"emulator",{"type":7},"",null,true,[["x"]]]`,
		`["` + strings.Repeat("x", 200) + `"]`, `["` + strings.Repeat("é", 130) + `"]`,
		`["` + strings.Repeat("x", 127) + `€"]`, `["\u00e9\n\"q\"", "\\u00e9", "\ud83d\ude00"]`,
		` [ "spaced" , { "type" : "obj" } ] `, `[{"type":{"type":"nested"}}]`,
	}
	for _, doc := range docs {
		var raw json.RawMessage
		if doc != "" {
			raw = json.RawMessage(doc)
		}
		got := postgres.ThreatTypes(raw)
		var want []string
		payload := "{}"
		if doc != "" && doc != "null" {
			payload = `{"threats":` + doc + `}`
		}
		if err := pool.QueryRow(t.Context(), "SELECT facts.threat_types($1::jsonb)", payload).Scan(&want); err != nil {
			t.Fatalf("facts.threat_types(%s): %v", payload, err)
		}
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("ThreatTypes(%.60s) = %q, want %q", doc, got, want)
		}
	}
}

// TestStore_WriteBatch_OutboxLockOnlyForThreats checks that a batch without
// a threat event does not wait on the outbox's commit-order lock (migration
// 000011), which its statement trigger took for every batch, and that one
// with a threat event still takes it.
func TestStore_WriteBatch_OutboxLockOnlyForThreats(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(41, 41))
	now := time.Now().UTC().Truncate(time.Microsecond)
	holder, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background()) //nolint:errcheck
	if _, err := holder.Exec(t.Context(), "SELECT pg_advisory_xact_lock(128051789459298)"); err != nil {
		t.Fatal(err)
	}
	plain := pgtest.Event(r, now, 0)
	plain.Threats = json.RawMessage(`[]`)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.WriteBatch(ctx, []wire.Event{plain}); err != nil {
		t.Fatalf("WriteBatch of an event without threats while the outbox lock is held: %v", err)
	}
	threat := pgtest.Event(r, now, 0)
	threat.Threats = json.RawMessage(`["root"]`)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel2()
	if _, err := s.WriteBatch(ctx2, []wire.Event{threat}); err == nil {
		t.Fatalf("WriteBatch of a threat event did not wait for the outbox lock")
	}
}

// TestStore_WriteBatch_SuppressedInTheInsert checks that the store itself
// drops a suppressed device's events, whatever the processor's cached set
// says (a stale cache stored them after the erasure reported clean).
func TestStore_WriteBatch_SuppressedInTheInsert(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(42, 42))
	now := time.Now().UTC().Truncate(time.Microsecond)
	gone, kept := pgtest.Event(r, now, 0), pgtest.Event(r, now, 0)
	kept.Threats = json.RawMessage(`["root"]`)
	if _, err := pool.Exec(t.Context(), `INSERT INTO events.suppressions (app_id, device_id, created_by)
		VALUES ($1, $2, 'test')`, gone.App.ID, gone.Device.ID); err != nil {
		t.Fatal(err)
	}
	if res := write(t, s, gone, kept); res.Stored != 1 {
		t.Fatalf("WriteBatch = %+v, want 1 stored (the suppressed device's event dropped)", res)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.events WHERE id = $1", gone.ID); n != 0 {
		t.Fatalf("suppressed device's event stored %d times, want 0", n)
	}
	pgtest.AssertRollupsExact(t, pool, 1)
	// Lifted, the device's events are stored again.
	if _, err := pool.Exec(t.Context(), `UPDATE events.suppressions SET lifted_at = now(), lifted_by = 'test'`); err != nil {
		t.Fatal(err)
	}
	if res := write(t, s, gone); res.Stored != 1 {
		t.Fatalf("WriteBatch after the lift = %+v, want 1 stored", res)
	}
}

// TestStore_ErasureRacesWriteInFlight holds a write of a device's event
// between its insert and its commit while an erasure suppresses the device
// and then deletes its events. The erasure must not report clean with the
// event committed after it: the suppression waits for the write in flight
// (the app's lock), so the delete that follows sees, and removes, the event.
func TestStore_ErasureRacesWriteInFlight(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(43, 43))
	now := time.Now().UTC().Truncate(time.Microsecond)
	e := pgtest.Event(r, now, 0)
	inserted, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.BeforeCommit(func() {
		once.Do(func() {
			close(inserted)
			<-release
		})
	})
	wrote := make(chan error, 1)
	go func() {
		_, err := s.WriteBatch(context.Background(), []wire.Event{e})
		wrote <- err
	}()
	<-inserted
	erased := make(chan error, 1)
	go func() {
		// The privacy runner's order: suppress, then delete what is stored.
		_, err := pool.Exec(context.Background(), `INSERT INTO events.suppressions (app_id, device_id, created_by)
			VALUES ($1, $2, 'test')`, e.App.ID, e.Device.ID)
		if err == nil {
			_, err = pool.Exec(context.Background(), `DELETE FROM events.events WHERE app_id = $1 AND device_id = $2`, e.App.ID, e.Device.ID)
		}
		erased <- err
	}()
	var eraseErr error
	done := false
	select {
	case eraseErr = <-erased:
		done = true
		t.Logf("the erasure finished with the write still in flight")
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("WriteBatch: %v", err)
	}
	if !done {
		select {
		case eraseErr = <-erased:
		case <-time.After(10 * time.Second):
			t.Fatal("erasure still waiting 10 s after the write committed")
		}
	}
	if eraseErr != nil {
		t.Fatalf("erasure: %v", eraseErr)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.events WHERE app_id = $1 AND device_id = $2", e.App.ID, e.Device.ID); n != 0 {
		t.Fatalf("%d events of the erased device left after the erasure, want 0", n)
	}
}

// TestStore_ParallelWritersResend is the duplicate race: two writers (two
// stores, as at a leader hand-over or with two processors) each get a copy
// of the same event id with a different received_at (a client re-send), at
// the same time, many times. Each id must be stored once, and the rollups
// count it once.
func TestStore_ParallelWritersResend(t *testing.T) {
	url, pool := pgtest.MustEventsDB(t)
	var stores [2]*postgres.Store
	for i := range stores {
		s, err := postgres.Open(context.Background(), url, 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores[i] = s
	}
	r := rand.New(rand.NewPCG(44, 44))
	now := time.Now().UTC().Truncate(time.Microsecond)
	const rounds, perRound = 60, 20
	for round := range rounds {
		var batches [2][]wire.Event
		for range perRound {
			e := pgtest.Event(r, now, time.Hour)
			again := e
			again.ReceivedAt = e.ReceivedAt.Add(time.Duration(1+r.IntN(1000)) * time.Millisecond)
			batches[0] = append(batches[0], e)
			batches[1] = append(batches[1], again)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range stores {
			wg.Go(func() {
				<-start
				// Retried as the consumer retries a transient error.
				for range 10 {
					if _, errs[i] = stores[i].WriteBatch(context.Background(), batches[i]); !errors.Is(errs[i], processor.ErrUnavailable) {
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, writer %d: %v", round, i, err)
			}
		}
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) - count(DISTINCT (id, app_id)) FROM events.events"); n != 0 {
		t.Fatalf("%d re-sent ids stored twice by two writers (of %d)", n, rounds*perRound)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.events"); n != rounds*perRound {
		t.Fatalf("events stored = %d, want %d", n, rounds*perRound)
	}
	pgtest.AssertRollupsExact(t, pool, rounds*perRound)
}

// TestStore_WriteBatch_ConcurrentCopyIsRetried checks the one way a copy
// can meet the insert's key without the probe seeing it: a writer that
// does not take the app's lock commits the same row while the statement
// runs. The unique violation is transient (retried, then skipped as a
// duplicate), never a reason to dead-letter the request.
func TestStore_WriteBatch_ConcurrentCopyIsRetried(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(45, 45))
	now := time.Now().UTC().Truncate(time.Microsecond)
	e := pgtest.Event(r, now, 0)
	other, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(context.Background()) //nolint:errcheck
	if _, err := other.Exec(t.Context(), `INSERT INTO events.events (id, received_at, occurred_at, type, app_id, country)
		VALUES ($1, $2, $3, 'app.startup', $4, 'DE')`, e.ID, e.ReceivedAt, e.OccurredAt, e.App.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.WriteBatch(context.Background(), []wire.Event{e})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the insert waits on the other's key
	if err := other.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, processor.ErrUnavailable) || errors.Is(err, processor.ErrUnstorable) {
		t.Fatalf("WriteBatch beside a concurrent copy = %v, want a transient error (ErrUnavailable)", err)
	}
	if res := write(t, s, e); res != (processor.WriteResult{Duplicates: 1}) {
		t.Fatalf("retried WriteBatch = %+v, want 1 duplicate", res)
	}
}
