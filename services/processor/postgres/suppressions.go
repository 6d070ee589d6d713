package postgres

import (
	"context"
	"fmt"

	"threatview/processor"
)

// Suppressions returns the subjects under an active suppression
// (events.suppressions without lifted_at). Errors wrap ErrUnavailable.
func (s *Store) Suppressions(ctx context.Context) ([]processor.Subject, error) {
	rows, err := s.pool.Query(ctx, `SELECT app_id, device_id FROM events.suppressions WHERE lifted_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("read suppressions: %w: %w", processor.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []processor.Subject
	for rows.Next() {
		var x processor.Subject
		if err := rows.Scan(&x.AppID, &x.DeviceID); err != nil {
			return nil, fmt.Errorf("read suppressions: %w: %w", processor.ErrUnavailable, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read suppressions: %w: %w", processor.ErrUnavailable, err)
	}
	return out, nil
}
