package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/platform/wire"
)

// Late data. ensure_monthly_partitions never re-creates a month that was
// archived and dropped (migration 000004): the archive is then the only copy
// of that month, and a re-created partition would be refused by cleanup
// until a re-archive. An event received for such a month is held instead
// in events.late_events with its reason; `archiver --late` archives the
// held events beside the month's verified archive. Held events have no
// facts and count in no rollup (the rollups equal count(*) over
// events.events, where they are not).

// HeldLate returns how many events this Store has held in
// events.late_events since it was opened (a metric).
func (s *Store) HeldLate() uint64 { return s.held.Load() }

// holdLateSQL moves the copied batch into the holding table; a redelivered
// event is a conflict and skipped.
const holdLateSQL = `
INSERT INTO events.late_events (id, received_at, occurred_at, type, app_id, app_version, device_id,
	device_model, manufacturer, os, os_version, country, client_ip, token_id, request_id, payload, reason)
SELECT DISTINCT ON (id, app_id) id, received_at, occurred_at, type, app_id, app_version, device_id,
	device_model, manufacturer, os, os_version, country, client_ip, token_id, request_id, payload,
	format('received for %s, a month that was archived and dropped', to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM'))
FROM batch_events ORDER BY id, app_id, received_at
ON CONFLICT DO NOTHING`

// holdLate holds the events of months that have no partition of
// events.events or facts.facts after ensurePartitions (so: archived and
// dropped) and
// returns the other events, how many it held now and how many were held
// already (a redelivery).
func (s *Store) holdLate(ctx context.Context, events []wire.Event) (rest []wire.Event, held, dups int, err error) {
	gone := map[time.Time]bool{}
	for _, e := range events {
		m := monthOf(e.ReceivedAt)
		if _, seen := gone[m]; seen {
			continue
		}
		// Cleanup drops a month of events and of facts together; should only
		// one be gone, the events are held all the same (nothing is lost).
		var exists bool
		suffix := fmt.Sprintf("_y%04dm%02d", m.Year(), int(m.Month()))
		if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL",
			"events.events"+suffix, "facts.facts"+suffix).Scan(&exists); err != nil {
			return nil, 0, 0, fmt.Errorf("look up partitions of %s: %w", m.Format("2006-01"), err)
		}
		gone[m] = !exists
	}
	var late []wire.Event
	for _, e := range events {
		if gone[monthOf(e.ReceivedAt)] {
			late = append(late, e)
		} else {
			rest = append(rest, e)
		}
	}
	if len(late) == 0 {
		return events, 0, 0, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"batch_events"}, batchColumns, newRows(late)); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		tag, err := tx.Exec(ctx, holdLateSQL)
		if err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		held = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("hold %d late events: %w", len(late), err)
	}
	s.held.Add(uint64(held))
	return rest, held, len(late) - held, nil
}

func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
