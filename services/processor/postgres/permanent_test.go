package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// TestStore_WriteRequests_LateMonth: the slow path holds the events of a
// month that was archived and dropped, like WriteBatch, and still isolates
// a refused request.
func TestStore_WriteRequests_LateMonth(t *testing.T) {
	s, pool := mustStore(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(23, 23))
	now := time.Now().UTC().Truncate(time.Microsecond)
	month := time.Date(now.Year(), now.Month()-3, 1, 0, 0, 0, 0, time.UTC)
	for _, table := range []string{"events.events", "facts.facts"} {
		schema, rel, _ := strings.Cut(table, ".")
		if _, err := pool.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s_y%04dm%02d", schema, rel, month.Year(), int(month.Month()))); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO events.archives (table_name, month, range_to, partition_name, row_count,
			byte_count, files, content_sha256, manifest_sha256, location, schema_version, verified_at)
			VALUES ($1, $2, $3, $4, 0, 0, '[]', 'x', 'x', 'dir:///x', 1, now())`,
			table, month, month.AddDate(0, 1, 0), fmt.Sprintf("%s_y%04dm%02d", rel, month.Year(), int(month.Month()))); err != nil {
			t.Fatal(err)
		}
	}
	late := pgtest.Event(r, month.Add(50*time.Hour), time.Hour)
	current := pgtest.Event(r, now, 0)
	deep := pgtest.Event(r, now, 0)
	deep.Attributes = json.RawMessage(`{"a":` + strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000) + `}`)

	res, refused, err := s.WriteRequests(ctx, [][]wire.Event{{late, current}, {deep}})
	if err != nil {
		t.Fatalf("WriteRequests = %v", err)
	}
	if res != (processor.WriteResult{Stored: 2}) || len(refused) != 1 || refused[1] == nil {
		t.Fatalf("WriteRequests = %+v, refused %v; want 2 stored (one held), request 1 refused", res, refused)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.late_events WHERE id = $1", late.ID); n != 1 {
		t.Errorf("late event held %d times, want 1", n)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.events WHERE id = $1", current.ID); n != 1 {
		t.Errorf("current event stored %d times, want 1", n)
	}
}
