package postgres_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
)

// TestStore_WriteBatch_Outbox checks that every stored event with at least
// one threat gets exactly one alerts.outbox row, with its id and threat
// types, in the batch's transaction: none for an event without threats,
// none for a duplicate, and the same through the per-request path.
func TestStore_WriteBatch_Outbox(t *testing.T) {
	s, pool := mustStore(t)
	r := rand.New(rand.NewPCG(32, 32))
	now := time.Now().UTC().Truncate(time.Microsecond)

	threat := pgtest.Event(r, now, time.Minute)
	threat.Threats = json.RawMessage(`["hooking", {"type": "root"}, "hooking"]`)
	plain := pgtest.Event(r, now, time.Minute)
	plain.Threats = json.RawMessage(`[]`)
	none := pgtest.Event(r, now, time.Minute)
	none.Threats = nil

	write(t, s, threat, plain, none, threat)
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM alerts.outbox"); n != 1 {
		t.Fatalf("outbox rows = %d, want 1 (only the threat event, once)", n)
	}
	var threats []string
	var app string
	if err := pool.QueryRow(t.Context(), "SELECT app_id, threats FROM alerts.outbox WHERE event_id = $1", threat.ID).Scan(&app, &threats); err != nil {
		t.Fatalf("outbox row of %s: %v", threat.ID, err)
	}
	if app != threat.App.ID || len(threats) != 2 || threats[0] != "hooking" || threats[1] != "root" {
		t.Fatalf("outbox row = %s %v, want %s [hooking root]", app, threats, threat.App.ID)
	}

	// A re-delivery of the same message stores nothing and outboxes nothing.
	write(t, s, threat)
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM alerts.outbox"); n != 1 {
		t.Fatalf("outbox rows after re-delivery = %d, want 1", n)
	}

	// The per-request path writes the same rows.
	other := pgtest.Event(r, now, 0)
	other.Threats = json.RawMessage(`["debugger"]`)
	if _, refused, err := s.WriteRequests(t.Context(), [][]wire.Event{{other}}); err != nil || len(refused) != 0 {
		t.Fatalf("WriteRequests = %v, %v", refused, err)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM alerts.outbox WHERE event_id = $1", other.ID); n != 1 {
		t.Fatalf("outbox rows of the per-request write = %d, want 1", n)
	}
}
