// Package migrations holds the schema of Threat View's databases as
// embedded SQL files (goose format) and the partition maintenance that keeps
// monthly partitions ahead of time. The migrate command and the Helm hook Job
// apply them; services never migrate at startup.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed events/*.sql audit/*.sql tokens/*.sql identity/*.sql
var files embed.FS

// Target names one of the databases.
type Target string

// The databases.
const (
	Events Target = "events" // Postgres: schemas events and facts
	Audit  Target = "audit"  // MariaDB: audit_events
	Tokens Target = "tokens" // MariaDB: tokens
	// Identity is the identity service's MariaDB database: people, refresh
	// tokens, sign-in throttling and pending OIDC sign-ins.
	Identity Target = "identity"
)

// Targets lists every database in the order migrate applies them.
var Targets = []Target{Events, Audit, Tokens, Identity}

// Up applies every pending migration of target to db and returns how many
// were applied. Running it again applies nothing.
func Up(ctx context.Context, db *sql.DB, target Target) (int, error) {
	fsys, err := fs.Sub(files, string(target))
	if err != nil {
		return 0, fmt.Errorf("migrations for %s: %w", target, err)
	}
	dialect := goose.DialectMySQL
	// A migration numbered below one already applied (000003 added after
	// 000050) is applied, not refused: numbers order the files, and a
	// database migrated before the file existed still needs it.
	opts := []goose.ProviderOption{goose.WithAllowOutofOrder(true)}
	if target == Events {
		dialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return 0, fmt.Errorf("migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return 0, fmt.Errorf("migrations for %s: %w", target, err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return len(res), fmt.Errorf("migrate %s: %w", target, err)
	}
	return len(res), nil
}

// MaintainEventPartitions creates the monthly partitions of the events DB for
// the current month and ahead months after it; it returns how many it made.
func MaintainEventPartitions(ctx context.Context, db *sql.DB, ahead int) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT events.maintain_partitions($1)", ahead).Scan(&n); err != nil {
		return 0, fmt.Errorf("maintain event partitions: %w", err)
	}
	return n, nil
}

// EnsureAuditPartitions splits monthly partitions of audit_events off its
// catch-all partition (pmax) for the month of now and ahead months after it;
// it returns how many it made. Safe to run any number of times. Months below
// the highest existing partition are left to the catch-all's predecessors:
// partitions only ever grow upwards.
func EnsureAuditPartitions(ctx context.Context, db *sql.DB, now time.Time, ahead int) (int, error) {
	rows, err := db.QueryContext(ctx, `SELECT PARTITION_NAME FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'audit_events' AND PARTITION_NAME IS NOT NULL`)
	if err != nil {
		return 0, fmt.Errorf("list audit partitions: %w", err)
	}
	existing := map[string]bool{}
	highest := ""
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list audit partitions: %w", err)
		}
		existing[name] = true
		if name != "pmax" && name > highest {
			highest = name
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list audit partitions: %w", err)
	}
	if !existing["pmax"] {
		return 0, fmt.Errorf("audit_events has no catch-all partition pmax")
	}
	created := 0
	first := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i <= ahead; i++ {
		lo := first.AddDate(0, i, 0)
		name := AuditPartitionName(lo)
		if existing[name] || name <= highest {
			continue
		}
		hi := lo.AddDate(0, 1, 0)
		stmt := fmt.Sprintf("ALTER TABLE audit_events REORGANIZE PARTITION pmax INTO (PARTITION %s VALUES LESS THAN ('%s'), PARTITION pmax VALUES LESS THAN (MAXVALUE))",
			name, hi.Format("2006-01-02"))
		// sql: DDL; the partition name is digits from AuditPartitionName and the bound a formatted date.
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return created, fmt.Errorf("create audit partition %s: %w", name, err)
		}
		created++
		highest = name
	}
	return created, nil
}

// AuditPartitionName is the name of the audit_events partition holding the
// month that starts at monthStart, for example p202611.
func AuditPartitionName(monthStart time.Time) string {
	return monthStart.UTC().Format("p200601")
}
