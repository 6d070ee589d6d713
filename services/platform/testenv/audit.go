package testenv

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// AuditRowsSince returns the audit rows written at or after since, each as
// its text fields joined by '|' (actor app, action, resource, user agent,
// request id, body): what a test greps for a value that must never reach
// the audit trail.
func AuditRowsSince(tb testing.TB, db *sql.DB, since time.Time) []string {
	tb.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT CONCAT_WS('|', actor_app_id, action, resource, user_agent, request_id, COALESCE(body, ''))
		FROM audit_events WHERE time >= ?`, since)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			tb.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}
