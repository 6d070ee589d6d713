package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/retention"
)

// lateTable holds the events of months that were archived and dropped
// (migration 000004); only events.events has one.
const (
	lateTable  = "events.late_events"
	lateParent = "events.events"
)

// LateMonths lists the months with rows in events.late_events.
func (s *Source) LateMonths(ctx context.Context) ([]retention.Partition, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT date_trunc('month', received_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
		FROM events.late_events ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("late months: %w", err)
	}
	months, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("late months: %w", err)
	}
	out := make([]retention.Partition, len(months))
	for i, m := range months {
		m = m.UTC()
		out[i] = retention.Partition{Table: lateParent, Name: "late_events", Month: m, From: m, To: m.AddDate(0, 1, 0)}
	}
	return out, nil
}

// lateColumns is the select list of events.events' columns, quoted.
func (s *Source) lateColumns(ctx context.Context) (string, error) {
	cols, err := s.Columns(ctx, lateParent)
	if err != nil {
		return "", err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = pgx.Identifier{c.Name}.Sanitize()
	}
	return strings.Join(names, ", "), nil
}

// ExportLate streams the held rows of p's month as events.events rows
// (row_to_json of its columns only) in primary-key order, from one snapshot.
func (s *Source) ExportLate(ctx context.Context, p retention.Partition, emit func([]byte) error) error {
	if p.Table != lateParent {
		return fmt.Errorf("no late table for %s", p.Table)
	}
	list, err := s.lateColumns(ctx)
	if err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export late %s: %w", retention.MonthString(p.Month), err)
	}
	defer tx.Rollback(context.Background())
	// sql: identifiers only, quoted with pgx.Identifier.Sanitize; values are arguments.
	rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT row_to_json(t)::text FROM (SELECT %s FROM %s
		WHERE received_at >= $1 AND received_at < $2 ORDER BY id, app_id, received_at) t`, list, lateTable),
		pgx.QueryResultFormats{pgx.TextFormatCode}, p.From, p.To)
	if err != nil {
		return fmt.Errorf("export late %s: %w", retention.MonthString(p.Month), err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := emit(rows.RawValues()[0]); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export late %s: %w", retention.MonthString(p.Month), err)
	}
	return nil
}

// SaveLate records r in events.late_archives and deletes the held rows
// whose keys appear in lines, in one transaction.
func (s *Source) SaveLate(ctx context.Context, r retention.LateRecord, lines [][]byte) (int64, error) {
	ids := make([]string, len(lines))
	apps := make([]string, len(lines))
	times := make([]string, len(lines))
	for i, l := range lines {
		var k struct {
			ID         string `json:"id"`
			AppID      string `json:"app_id"`
			ReceivedAt string `json:"received_at"`
		}
		if err := json.Unmarshal(l, &k); err != nil || k.ID == "" || k.ReceivedAt == "" {
			return 0, fmt.Errorf("late row %d has no key: %v", i, err)
		}
		ids[i], apps[i], times[i] = k.ID, k.AppID, k.ReceivedAt
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO events.late_archives (table_name, month, prefix, row_count,
			content_sha256, manifest_sha256, location, verified_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			r.Table, r.Month, r.Prefix, r.Rows, r.ContentSHA256, r.ManifestSHA256, r.Location, r.VerifiedAt); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM events.late_events l
			USING unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS k(id, app_id, received_at)
			WHERE l.id = k.id AND l.app_id = k.app_id AND l.received_at = k.received_at`, ids, apps, times)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		if n != int64(len(lines)) {
			return fmt.Errorf("released %d held rows, archived %d", n, len(lines))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record late archive %s: %w", r.Location, err)
	}
	return n, nil
}

// ReplaceLate implements retention.LateSource: in one transaction the
// record of the archive under oldPrefix goes and r's is written.
func (s *Source) ReplaceLate(ctx context.Context, oldPrefix string, r retention.LateRecord) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM events.late_archives WHERE table_name = $1 AND month = $2 AND prefix = $3`,
			r.Table, r.Month, oldPrefix); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO events.late_archives (table_name, month, prefix, row_count,
			content_sha256, manifest_sha256, location, verified_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			r.Table, r.Month, r.Prefix, r.Rows, r.ContentSHA256, r.ManifestSHA256, r.Location, r.VerifiedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("record rewritten late archive %s: %w", r.Location, err)
	}
	return nil
}

var _ retention.LateSource = (*Source)(nil)
