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
