package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"threatview/migrations"
)

// PartitionsAhead reads from information_schema.PARTITIONS how many whole
// months after the month of now have their own partition of audit_events,
// counting from next month until the first one missing (rows of a missing
// month fall into the next partition up, or the catch-all pmax).
func PartitionsAhead(ctx context.Context, db *sql.DB, now time.Time) (int, error) {
	rows, err := db.QueryContext(ctx, `SELECT PARTITION_NAME FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'audit_events' AND PARTITION_NAME IS NOT NULL`)
	if err != nil {
		return 0, fmt.Errorf("list audit partitions: %w", err)
	}
	defer rows.Close()
	parts := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return 0, fmt.Errorf("list audit partitions: %w", err)
		}
		parts[name] = true
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list audit partitions: %w", err)
	}
	first := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	ahead := 0
	for parts[migrations.AuditPartitionName(first.AddDate(0, ahead+1, 0))] {
		ahead++
	}
	return ahead, nil
}
