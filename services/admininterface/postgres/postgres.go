// Package postgres reads the events database's partitions and archive
// records for the retention page; it only reads.
package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/admininterface"
)

// tables are the partitioned tables retention manages in this database.
var tables = []string{"events.events", "facts.facts"}

// Reader reads one events database.
type Reader struct{ pool *pgxpool.Pool }

// Open connects lazily (at most two connections, read-only transactions).
func Open(ctx context.Context, url string) (*Reader, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("EVENTS_DATABASE_URL: %w", err)
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "10000"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("events database: %w", err)
	}
	return &Reader{pool: pool}, nil
}

// Close closes the pool.
func (r *Reader) Close() { r.pool.Close() }

// Partitions lists the partitions of the managed tables, oldest first, with
// the planner's row estimate and the size with indexes.
func (r *Reader) Partitions(ctx context.Context) ([]admininterface.Partition, error) {
	rows, err := r.pool.Query(ctx, `
		SELECT pn.nspname || '.' || p.relname, c.relname, pg_get_expr(c.relpartbound, c.oid),
		       GREATEST(c.reltuples, 0)::bigint, pg_total_relation_size(c.oid)
		  FROM pg_inherits i
		  JOIN pg_class c ON c.oid = i.inhrelid
		  JOIN pg_class p ON p.oid = i.inhparent
		  JOIN pg_namespace pn ON pn.oid = p.relnamespace
		 WHERE pn.nspname || '.' || p.relname = ANY($1)
		 ORDER BY 1, 2`, tables)
	if err != nil {
		return nil, fmt.Errorf("%w: list partitions: %v", admininterface.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []admininterface.Partition
	for rows.Next() {
		p := admininterface.Partition{Database: "events"}
		if err := rows.Scan(&p.Table, &p.Name, &p.Bound, &p.Rows, &p.Bytes); err != nil {
			return nil, fmt.Errorf("scan partition: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Archives lists the verified archives, newest month first.
func (r *Reader) Archives(ctx context.Context) ([]admininterface.Archive, error) {
	rows, err := r.pool.Query(ctx, `
		SELECT table_name, month, partition_name, row_count, byte_count, content_sha256, location, verified_at
		  FROM events.archives ORDER BY month DESC, table_name LIMIT 500`)
	if err != nil {
		return nil, fmt.Errorf("%w: list archives: %v", admininterface.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []admininterface.Archive
	for rows.Next() {
		a := admininterface.Archive{Database: "events"}
		if err := rows.Scan(&a.Table, &a.Month, &a.Partition, &a.Rows, &a.Bytes, &a.SHA256, &a.Location, &a.VerifiedAt); err != nil {
			return nil, fmt.Errorf("scan archive: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Ping checks the connection.
func (r *Reader) Ping(ctx context.Context) error { return r.pool.Ping(ctx) }
