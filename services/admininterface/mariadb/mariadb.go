// Package mariadb reads the audit database's partitions and archive records
// for the retention page; it only reads.
package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"threatview/admininterface"
)

// Reader reads one audit database.
type Reader struct{ db *sql.DB }

// Open prepares a connection pool (two connections at most).
func Open(dsn string) (*Reader, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("AUDIT_DATABASE_DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	return &Reader{db: db}, nil
}

// Close closes the pool.
func (r *Reader) Close() error { return r.db.Close() }

// Partitions lists audit_events' partitions in order, with InnoDB's row
// estimate and the size with indexes.
func (r *Reader) Partitions(ctx context.Context) ([]admininterface.Partition, error) {
	rows, err := r.db.QueryContext(ctx, `
		SELECT PARTITION_NAME, COALESCE(PARTITION_DESCRIPTION, ''), COALESCE(TABLE_ROWS, 0),
		       COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)
		  FROM information_schema.PARTITIONS
		 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'audit_events' AND PARTITION_NAME IS NOT NULL
		 ORDER BY PARTITION_ORDINAL_POSITION`)
	if err != nil {
		return nil, fmt.Errorf("%w: list partitions: %v", admininterface.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []admininterface.Partition
	for rows.Next() {
		p := admininterface.Partition{Database: "audit", Table: "audit_events"}
		var desc string
		if err := rows.Scan(&p.Name, &desc, &p.Rows, &p.Bytes); err != nil {
			return nil, fmt.Errorf("scan partition: %w", err)
		}
		p.Bound = "VALUES LESS THAN (" + desc + ")"
		out = append(out, p)
	}
	return out, rows.Err()
}

// Archives lists the verified archives, newest month first.
func (r *Reader) Archives(ctx context.Context) ([]admininterface.Archive, error) {
	rows, err := r.db.QueryContext(ctx, `
		SELECT table_name, month, partition_name, row_count, byte_count, content_sha256, location, verified_at
		  FROM archives ORDER BY month DESC, table_name LIMIT 500`)
	if err != nil {
		return nil, fmt.Errorf("%w: list archives: %v", admininterface.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []admininterface.Archive
	for rows.Next() {
		a := admininterface.Archive{Database: "audit"}
		if err := rows.Scan(&a.Table, &a.Month, &a.Partition, &a.Rows, &a.Bytes, &a.SHA256, &a.Location, &a.VerifiedAt); err != nil {
			return nil, fmt.Errorf("scan archive: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
