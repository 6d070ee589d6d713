package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor"
	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

// TestStore_WriteBatch_Permanent checks that the errors one request's rows
// cause are reported as ErrUnstorable (isolate the request, never retry
// forever) and that a lost connection is not.
func TestStore_WriteBatch_Permanent(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(21, 21))
	now := time.Now().UTC().Truncate(time.Microsecond)
	ctx := context.Background()

	t.Run("ErrUnstorable max_stack_depth", func(t *testing.T) {
		e := pgtest.Event(r, now, 0)
		// Far deeper than encoding/json decodes: only a writer that skipped
		// the envelope's rules could hand it over, but Postgres must not
		// make the queue stop for it.
		e.Attributes = json.RawMessage(`{"a":` + strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000) + `}`)
		_, err := s.WriteBatch(ctx, []wire.Event{e})
		if !errors.Is(err, processor.ErrUnstorable) {
			t.Fatalf("WriteBatch(deep) = %v, want ErrUnstorable", err)
		}
		t.Logf("WriteBatch(deep) = %v", err)
	})
	t.Run("ErrUnstorable unique violation in facts", func(t *testing.T) {
		e := pgtest.Event(r, now, 0)
		// A facts row left behind by an events partition that was dropped.
		write(t, s, e)
		if _, err := pool.Exec(ctx, `DELETE FROM events.events WHERE id = $1`, e.ID); err != nil {
			t.Fatalf("delete event: %v", err)
		}
		_, err := s.WriteBatch(ctx, []wire.Event{e})
		if !errors.Is(err, processor.ErrUnstorable) {
			t.Fatalf("WriteBatch(stale fact) = %v, want ErrUnstorable", err)
		}
		t.Logf("WriteBatch(stale fact) = %v", err)
	})
	t.Run("ErrUnavailable closed pool", func(t *testing.T) {
		url, _ := pgtest.MustEventsDB(t)
		closed, err := postgres.Open(ctx, url, 2)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		closed.Close()
		_, err = closed.WriteBatch(ctx, []wire.Event{pgtest.Event(r, now, 0)})
		if err == nil || errors.Is(err, processor.ErrUnstorable) || !errors.Is(err, processor.ErrUnavailable) {
			t.Fatalf("WriteBatch(closed pool) = %v, want ErrUnavailable only", err)
		}
	})
}

// TestStore_WriteRequests checks the slow path: one transaction, a
// savepoint per request; the requests Postgres refuses are reported and
// rolled back, every other one is stored.
func TestStore_WriteRequests(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(22, 22))
	now := time.Now().UTC().Truncate(time.Microsecond)
	ctx := context.Background()

	good1 := []wire.Event{pgtest.Event(r, now, 0), pgtest.Event(r, now, 0)}
	deep := []wire.Event{pgtest.Event(r, now, 0), pgtest.Event(r, now, 0)}
	deep[1].Attributes = json.RawMessage(`{"a":` + strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000) + `}`)
	stale := []wire.Event{pgtest.Event(r, now, 0)}
	write(t, s, stale...)
	if _, err := pool.Exec(ctx, `DELETE FROM events.events WHERE id = $1`, stale[0].ID); err != nil {
		t.Fatalf("delete event: %v", err)
	}
	good2 := []wire.Event{pgtest.Event(r, now, 0), good1[0]} // a repeat of good1's first event

	res, refused, err := s.WriteRequests(ctx, [][]wire.Event{good1, deep, stale, good2})
	if err != nil {
		t.Fatalf("WriteRequests = %v", err)
	}
	if res != (processor.WriteResult{Stored: 3, Duplicates: 1}) {
		t.Errorf("WriteRequests = %+v, want 3 stored, 1 duplicate", res)
	}
	if len(refused) != 2 || !errors.Is(refused[1], processor.ErrUnstorable) || !errors.Is(refused[2], processor.ErrUnstorable) {
		t.Fatalf("refused = %v, want requests 1 and 2", refused)
	}
	for _, e := range append(good1, good2[0]) {
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.events WHERE id = $1", e.ID); n != 1 {
			t.Errorf("good event %s stored %d times", e.ID, n)
		}
	}
	for _, e := range append(deep, stale...) {
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.events WHERE id = $1", e.ID); n != 0 {
			t.Errorf("refused event %s stored %d times", e.ID, n)
		}
	}
}
