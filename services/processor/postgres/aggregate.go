package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/processor"
)

// claimSQL moves at most $1 of the oldest work items into the staging table.
const claimSQL = `
WITH claimed AS (
	DELETE FROM facts.facts_to_process
	WHERE seq IN (SELECT seq FROM facts.facts_to_process ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
	RETURNING occurred_at, app_id, country, device_model_id, os, threats
)
INSERT INTO facts.aggregate_staging (occurred_at, app_id, country, device_model_id, os, threats)
SELECT occurred_at, app_id, country, device_model_id, os, threats FROM claimed`

// rollupSQL adds the staged facts into the twelve rollups, per app, and
// into their summaries over all apps (facts.all_apps_*). Buckets
// are UTC, by the (skew-corrected) occurred_at, so a late event adds to its
// own past bucket. A threat rollup counts one per distinct threat type of
// an event (facts.threats holds each type once).
var rollupSQL = func() []string {
	grains := []struct{ table, bucket string }{
		{"hour", "date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"},
		{"day", "(occurred_at AT TIME ZONE 'UTC')::date"},
		{"month", "date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date"},
	}
	keys := []struct{ table, col, expr, from string }{
		{"country", "country", "country", "facts.aggregate_staging"},
		{"device_model", "device_model_id", "device_model_id", "facts.aggregate_staging"},
		{"os", "os", "os", "facts.aggregate_staging"},
		{"threat", "threat", "x.threat", "facts.aggregate_staging s, unnest(s.threats) AS x(threat)"},
	}
	var out []string
	for _, k := range keys {
		for _, g := range grains {
			// ORDER BY keeps the order rows are locked in the same in every
			// run, so two aggregators (a leader hand-over) never deadlock.
			out = append(out, fmt.Sprintf(`INSERT INTO facts.events_by_%s_per_%s AS t (app_id, bucket, %s, count)
SELECT app_id, %s, %s, count(*) FROM %s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
ON CONFLICT (app_id, bucket, %s) DO UPDATE SET count = t.count + excluded.count`,
				k.table, g.table, k.col, g.bucket, k.expr, k.from, k.col),
				fmt.Sprintf(`INSERT INTO facts.all_apps_events_by_%s_per_%s AS t (bucket, %s, count)
SELECT %s, %s, count(*) FROM %s GROUP BY 1, 2 ORDER BY 1, 2
ON CONFLICT (bucket, %s) DO UPDATE SET count = t.count + excluded.count`,
					k.table, g.table, k.col, g.bucket, k.expr, k.from, k.col))
		}
	}
	return out
}()

// Aggregate claims at most limit pending facts, adds them to the rollups and
// forgets them, all in one transaction, and returns how many it folded.
// Errors wrap ErrUnavailable; on error nothing changed.
func (s *Store) Aggregate(ctx context.Context, limit int) (int, error) {
	n, err := s.aggregate(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("aggregate: %w: %w", processor.ErrUnavailable, err)
	}
	return n, nil
}

func (s *Store) aggregate(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	tag, err := tx.Exec(ctx, claimSQL, limit)
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	n := int(tag.RowsAffected())
	if n == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	for _, q := range rollupSQL {
		b.Queue(q)
	}
	b.Queue("DELETE FROM facts.aggregate_staging")
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("roll up %d facts: %w", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}

// Lag returns the age of the oldest row of facts.facts_to_process, or 0.
func (s *Store) Lag(ctx context.Context) (time.Duration, error) {
	var secs float64
	err := s.pool.QueryRow(ctx, `SELECT extract(epoch FROM clock_timestamp() - enqueued_at)::float8
		FROM facts.facts_to_process ORDER BY seq LIMIT 1`).Scan(&secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("aggregation lag: %w: %w", processor.ErrUnavailable, err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
