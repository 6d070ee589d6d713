package postgres_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor"
	"threatview/processor/internal/pgtest"
)

// TestStore_WriteBatch_DedupWithinApp checks that an event id is unique
// within its app only: app B sending app A's event_id neither suppresses A's
// event nor is suppressed by it, while each app's own re-sends are still
// stored once. (Before migration 000002 the id was unique across apps, and
// whichever app came second lost its event.)
func TestStore_WriteBatch_DedupWithinApp(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(31, 31))
	now := time.Now().UTC().Truncate(time.Microsecond)
	thisMonth := time.Date(now.Year(), now.Month(), 1, 12, 0, 0, 0, time.UTC)

	rows := func(id string) int {
		return pgtest.Count(t, pool, "SELECT count(*) FROM events.events WHERE id = $1", id)
	}
	facts := func(id string) int {
		return pgtest.Count(t, pool, "SELECT count(*) FROM facts.facts WHERE event_id = $1", id)
	}
	withApp := func(e wire.Event, app string, recv time.Time) wire.Event {
		e.App.ID = app
		e.ReceivedAt = recv
		e.RequestID = pgtest.UUID(r)
		return e
	}

	t.Run("OK other app later, same month", func(t *testing.T) {
		a := withApp(pgtest.Event(r, thisMonth, 0), "app-a", thisMonth)
		b := withApp(a, "app-b", thisMonth.Add(time.Hour))
		if res := write(t, s, a); res.Stored != 1 {
			t.Fatalf("A: %+v", res)
		}
		if res := write(t, s, b); res != (processor.WriteResult{Stored: 1}) {
			t.Fatalf("B with A's id = %+v, want stored", res)
		}
		if rows(a.ID) != 2 || facts(a.ID) != 2 {
			t.Fatalf("rows, facts for the shared id = %d, %d, want 2, 2", rows(a.ID), facts(a.ID))
		}
		// Each app's own re-send is still a duplicate.
		again := withApp(a, "app-a", thisMonth.Add(2*time.Hour))
		againB := withApp(a, "app-b", thisMonth.Add(3*time.Hour))
		if res := write(t, s, again, againB); res != (processor.WriteResult{Duplicates: 2}) {
			t.Fatalf("re-sends = %+v, want 2 duplicates", res)
		}
	})
	t.Run("OK both apps in one batch, same received_at", func(t *testing.T) {
		a := withApp(pgtest.Event(r, now, 0), "app-a", now)
		b := withApp(a, "app-b", now)
		if res := write(t, s, a, b, a); res != (processor.WriteResult{Stored: 2, Duplicates: 1}) {
			t.Fatalf("WriteBatch = %+v, want 2 stored, 1 duplicate", res)
		}
		if rows(a.ID) != 2 || facts(a.ID) != 2 {
			t.Fatalf("rows, facts = %d, %d, want 2, 2", rows(a.ID), facts(a.ID))
		}
	})
	t.Run("OK other app first", func(t *testing.T) {
		b := withApp(pgtest.Event(r, now, 0), "app-b", now)
		a := withApp(b, "app-a", now.Add(time.Second))
		write(t, s, b)
		if res := write(t, s, a); res.Stored != 1 {
			t.Fatalf("A after B with the same id = %+v, want stored", res)
		}
	})
}
