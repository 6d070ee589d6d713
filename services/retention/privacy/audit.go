package privacy

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// AuditDB redacts audit bodies in the audit DB (MariaDB audit_events).
type AuditDB struct {
	db *sql.DB
}

// NewAuditDB returns the audit DB adapter.
func NewAuditDB(db *sql.DB) *AuditDB { return &AuditDB{db: db} }

// needle is the subject's device id (or user pseudonym) as it appears in
// a JSON body: a JSON string. A body naming it under another escaping is
// not found (docs/privacy.md).
func needle(key string) string {
	b, _ := json.Marshal(key)
	return string(b)
}

// RedactBatch implements Redactor: the body goes, the row with its
// body_sha256 stays, so the audit trail's proofs (which cover body_sha256,
// not the body) keep verifying.
func (a *AuditDB) RedactBatch(ctx context.Context, s Subject, n int) (int64, error) {
	res, err := a.db.ExecContext(ctx, `UPDATE audit_events SET body = NULL
		WHERE actor_app_id = ? AND body IS NOT NULL AND INSTR(body, ?) > 0 LIMIT ?`, s.AppID, needle(s.key()), n)
	if err != nil {
		return 0, fmt.Errorf("redact audit bodies: %w: %w", ErrUnavailable, err)
	}
	return res.RowsAffected()
}

// Remaining implements Redactor.
func (a *AuditDB) Remaining(ctx context.Context, s Subject) (int64, error) {
	var n int64
	err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM audit_events
		WHERE actor_app_id = ? AND body IS NOT NULL AND INSTR(body, ?) > 0`, s.AppID, needle(s.key())).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count audit bodies: %w: %w", ErrUnavailable, err)
	}
	return n, nil
}
