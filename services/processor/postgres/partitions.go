package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"threatview/processor"
)

// partitionedTables are the monthly-partitioned tables MaintainPartitions keeps.
var partitionedTables = []string{"events.events", "facts.facts"}

// PartitionsAhead reads from the catalog (pg_inherits) how many whole months
// after the month of now have a partition in every monthly-partitioned table,
// counting from next month until the first month missing in any table.
func (s *Store) PartitionsAhead(ctx context.Context, now time.Time) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.relname, c.relname
		FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_class p ON p.oid = i.inhparent
		WHERE i.inhparent = ANY($1::regclass[])`, partitionedTables)
	if err != nil {
		return 0, fmt.Errorf("list partitions: %w: %w", processor.ErrUnavailable, err)
	}
	parts := map[string]bool{}
	for rows.Next() {
		var parent, child string
		if err := rows.Scan(&parent, &child); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list partitions: %w", err)
		}
		parts[parent+"/"+child] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list partitions: %w: %w", processor.ErrUnavailable, err)
	}
	first := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	for ahead := 0; ; ahead++ {
		m := first.AddDate(0, ahead+1, 0)
		for _, t := range partitionedTables {
			_, rel, _ := strings.Cut(t, ".")
			// Names follow events.ensure_monthly_partitions: <table>_yYYYYmMM.
			if !parts[rel+"/"+rel+m.Format("_y2006m01")] {
				return ahead, nil
			}
		}
	}
}
