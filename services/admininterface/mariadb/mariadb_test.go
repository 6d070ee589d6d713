package mariadb_test

import (
	"context"
	"testing"

	"threatview/admininterface/mariadb"
	"threatview/platform/testenv"
)

// TestReader reads the stack's migrated audit database (read-only).
func TestReader(t *testing.T) {
	dsn := testenv.MustEnv(t, "AUDIT_DATABASE_DSN")
	r, err := mariadb.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	parts, err := r.Partitions(ctx)
	if err != nil {
		t.Fatalf("Partitions: %v", err)
	}
	if len(parts) == 0 || parts[len(parts)-1].Name != "pmax" || parts[len(parts)-1].Bound != "VALUES LESS THAN (MAXVALUE)" {
		t.Errorf("Partitions = %+v, want audit_events' partitions ending with pmax", parts)
	}
	if _, err := r.Archives(ctx); err != nil {
		t.Errorf("Archives: %v", err)
	}
}
