package postgres_test

import (
	"context"
	"strings"
	"testing"

	"threatview/admininterface/postgres"
	"threatview/platform/testenv"
)

// TestReader reads the stack's migrated events database (read-only).
func TestReader(t *testing.T) {
	url := testenv.MustEnv(t, "EVENTS_DATABASE_URL")
	ctx := context.Background()
	r, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	parts, err := r.Partitions(ctx)
	if err != nil {
		t.Fatalf("Partitions: %v", err)
	}
	tables := map[string]bool{}
	for _, p := range parts {
		tables[p.Table] = true
		if !strings.HasPrefix(p.Bound, "FOR VALUES") || p.Bytes <= 0 || p.Database != "events" {
			t.Errorf("partition %+v", p)
		}
	}
	if !tables["events.events"] || !tables["facts.facts"] {
		t.Errorf("Partitions covers %v, want events.events and facts.facts", tables)
	}
	if _, err := r.Archives(ctx); err != nil {
		t.Errorf("Archives: %v", err)
	}
}
