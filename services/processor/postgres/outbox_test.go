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

// TestStore_WithoutOutbox checks that a store told the alerts service is off
// stores threat events, through both write paths, without an outbox row.
func TestStore_WithoutOutbox(t *testing.T) {
	s, pool := mustStore(t)
	s.WithoutOutbox()
	r := rand.New(rand.NewPCG(33, 33))
	now := time.Now().UTC().Truncate(time.Microsecond)

	batch := pgtest.Event(r, now, time.Minute)
	batch.Threats = json.RawMessage(`["hooking"]`)
	write(t, s, batch)
	req := pgtest.Event(r, now, 0)
	req.Threats = json.RawMessage(`["debugger"]`)
	if _, refused, err := s.WriteRequests(t.Context(), [][]wire.Event{{req}}); err != nil || len(refused) != 0 {
		t.Fatalf("WriteRequests = %v, %v", refused, err)
	}
	for _, e := range []wire.Event{batch, req} {
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM events.events WHERE id = $1", e.ID); n != 1 {
			t.Fatalf("events rows of %s = %d, want 1", e.ID, n)
		}
		if n := pgtest.Count(t, pool, "SELECT count(*) FROM alerts.outbox WHERE event_id = $1", e.ID); n != 0 {
			t.Fatalf("outbox rows of %s = %d, want 0 with the outbox off", e.ID, n)
		}
	}
}
