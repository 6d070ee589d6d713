package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"threatview/processor"
	"threatview/processor/internal/pgtest"
)

// TestStore_LateEventForDroppedMonth: an event received for a month that was
// archived and dropped is held in events.late_events with its reason; the
// month is not re-created, the rest of the batch is stored, and a
// redelivery stores nothing twice.
func TestStore_LateEventForDroppedMonth(t *testing.T) {
	s, pool := mustStore(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	now := time.Now().UTC().Truncate(time.Microsecond)
	month := time.Date(now.Year(), now.Month()-3, 1, 0, 0, 0, 0, time.UTC)
	part := fmt.Sprintf("events_y%04dm%02d", month.Year(), int(month.Month()))
	// Archived and dropped, as the archiver and cleanup leave it.
	for _, table := range []string{"events.events", "facts.facts"} {
		_, rel, _ := strings.Cut(table, ".")
		schema, _, _ := strings.Cut(table, ".")
		if _, err := pool.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s_y%04dm%02d", schema, rel, month.Year(), int(month.Month()))); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO events.archives (table_name, month, range_to, partition_name, row_count,
			byte_count, files, content_sha256, manifest_sha256, location, schema_version, verified_at)
			VALUES ($1, $2, $3, $4, 0, 0, '[]', 'x', 'x', 'dir:///x', 1, now())`, table, month, month.AddDate(0, 1, 0), part); err != nil {
			t.Fatal(err)
		}
	}
	late := pgtest.Event(r, month.Add(50*time.Hour), time.Hour)
	current := pgtest.Event(r, now, time.Hour)
	before := counts(t, pool)

	res := write(t, s, late, current)
	if res != (processor.WriteResult{Stored: 2}) {
		t.Errorf("WriteBatch = %+v, want 2 stored (one held)", res)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM pg_class WHERE relname = $1", part); n != 0 {
		t.Fatalf("the dropped month %s was re-created", part)
	}
	var reason string
	if err := pool.QueryRow(ctx, "SELECT reason FROM events.late_events WHERE id = $1", late.ID).Scan(&reason); err != nil {
		t.Fatalf("late event not held: %v", err)
	}
	if !strings.Contains(reason, month.Format("2006-01")) || !strings.Contains(reason, "dropped") {
		t.Errorf("reason = %q, want the month and that it was dropped", reason)
	}
	if got, want := counts(t, pool), [3]int{before[0] + 1, before[1] + 1, before[2] + 1}; got != want {
		t.Errorf("counts = %v, want %v (only the current event in events and facts)", got, want)
	}
	if n := s.HeldLate(); n != 1 {
		t.Errorf("HeldLate() = %d, want 1", n)
	}

	// A redelivery of the same message.
	if res := write(t, s, late, current); res != (processor.WriteResult{Duplicates: 2}) {
		t.Errorf("WriteBatch again = %+v, want 2 duplicates", res)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.late_events"); n != 1 {
		t.Errorf("held events after a redelivery = %d, want 1", n)
	}
}
