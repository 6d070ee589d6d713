// Package audittest makes realistic audit records and a migrated audit
// database for the module's tests.
package audittest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/auditlogger/mariadb"
	"threatview/migrations"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// NewID returns a random UUID string.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return auditlogger.FormatID(b)
}

// Record returns a record like the collector's for request i at t.
func Record(i int, t time.Time) wire.AuditRecord {
	sum := sha256.Sum256([]byte(fmt.Sprintf(`{"events":[%d]}`, i)))
	return wire.AuditRecord{
		ID:         NewID(),
		Time:       t.UTC(),
		ActorToken: fmt.Sprintf("tok_%026d", i%50),
		ActorApp:   fmt.Sprintf("com.example.app%d", i%7),
		Action:     "events.collect",
		Resource:   "/v1/events",
		Outcome:    202,
		ClientIP:   fmt.Sprintf("198.51.%d.%d", i/250%250, i%250+1),
		UserAgent:  "Mozilla/5.0 (Linux; Android 14; Pixel 8 Pro Build/UQ1A.240205.004) ThreatViewSDK/3.12.0 okhttp/4.12.0",
		RequestID:  NewID(),
		EventCount: 1 + i%5,
		BodySHA256: hex.EncodeToString(sum[:]),
	}
}

// Records returns n records one millisecond apart from t0.
func Records(n int, t0 time.Time) []wire.AuditRecord {
	out := make([]wire.AuditRecord, n)
	for i := range out {
		out[i] = Record(i, t0.Add(time.Duration(i)*time.Millisecond))
	}
	return out
}

// MustDB creates a fresh, migrated audit database and returns its DSN and
// an open handle (closed at cleanup).
func MustDB(tb testing.TB) (string, *sql.DB) {
	tb.Helper()
	dsn := testenv.MustMariaDB(tb)
	db, err := mariadb.Open(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := migrations.Up(ctx, db, migrations.Audit); err != nil {
		tb.Fatalf("migrate audit db: %v", err)
	}
	return dsn, db
}

// Count returns the rows of audit_events and how many distinct ids they hold.
func Count(tb testing.TB, db *sql.DB) (rows, ids int) {
	tb.Helper()
	if err := db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT id) FROM audit_events").Scan(&rows, &ids); err != nil {
		tb.Fatalf("count audit_events: %v", err)
	}
	return rows, ids
}
