package wire_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"threatview/platform/wire"
)

func validEvent() wire.Event {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return wire.Event{
		ID: "0193a4c2-7e1f-7c3a-9b2d-5e6f7a8b9c0d", Type: "app.startup",
		ReceivedAt: now, OccurredAt: now, App: wire.App{ID: "demo-app"}, Country: "ZZ",
	}
}

func TestDecodeEventBatch(t *testing.T) {
	good, _ := json.Marshal(wire.EventBatch{V: 1, Events: []wire.Event{validEvent()}})
	mutate := func(f func(*wire.Event)) []byte {
		e := validEvent()
		f(&e)
		b, _ := json.Marshal(wire.EventBatch{V: 1, Events: []wire.Event{e}})
		return b
	}
	tests := []struct {
		name string
		body []byte
		ok   bool
	}{
		{"OK", good, true},
		{"ErrNotJSON", []byte("{"), false},
		{"ErrVersion", []byte(`{"v":2,"events":[]}`), false},
		{"ErrEmpty", []byte(`{"v":1,"events":[]}`), false},
		{"ErrBadID", mutate(func(e *wire.Event) { e.ID = "nope" }), false},
		{"ErrNoType", mutate(func(e *wire.Event) { e.Type = "" }), false},
		{"ErrNoApp", mutate(func(e *wire.Event) { e.App.ID = "" }), false},
		{"ErrNoReceivedAt", mutate(func(e *wire.Event) { e.ReceivedAt = time.Time{} }), false},
		{"ErrCountry", mutate(func(e *wire.Event) { e.Country = "ZZZ" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.DecodeEventBatch(tt.body)
			if tt.ok && err != nil {
				t.Fatalf("DecodeEventBatch(%s) = %v, want nil", tt.body, err)
			}
			if !tt.ok && !errors.Is(err, wire.ErrInvalidEnvelope) {
				t.Fatalf("DecodeEventBatch(%s) = %v, want ErrInvalidEnvelope", tt.body, err)
			}
		})
	}
}

func TestDeadLetter(t *testing.T) {
	if got := wire.DeadLetter(wire.EventsQueue); got != "/queue/DLQ.threatview.events" {
		t.Fatalf("DeadLetter(%q) = %q", wire.EventsQueue, got)
	}
}

// FuzzDecodeEventBatch checks that no input panics the envelope decoder and
// that whatever it accepts survives a round trip unchanged.
func FuzzDecodeEventBatch(f *testing.F) {
	good, _ := json.Marshal(wire.EventBatch{V: 1, Events: []wire.Event{validEvent()}})
	f.Add(good)
	f.Add([]byte(`{"v":1,"events":[{"id":"x"}]}`))
	f.Add([]byte(`{"v":1,"events":null}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := wire.DecodeEventBatch(body)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalidEnvelope) {
				t.Fatalf("error %v does not wrap ErrInvalidEnvelope", err)
			}
			return
		}
		again, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("re-encode accepted batch: %v", err)
		}
		if _, err := wire.DecodeEventBatch(again); err != nil {
			t.Fatalf("accepted batch does not decode after a round trip: %v", err)
		}
	})
}

// FuzzDecodeAuditBatch does the same for audit batches.
func FuzzDecodeAuditBatch(f *testing.F) {
	rec := wire.AuditRecord{ID: "0193a4c2-7e1f-7c3a-9b2d-5e6f7a8b9c0d", Time: time.Now().UTC(), Action: "events.collect", Outcome: 202}
	good, _ := json.Marshal(wire.AuditBatch{V: 1, Records: []wire.AuditRecord{rec}})
	f.Add(good)
	f.Add([]byte(`{"v":1,"records":[{}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := wire.DecodeAuditBatch(body)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalidEnvelope) {
				t.Fatalf("error %v does not wrap ErrInvalidEnvelope", err)
			}
			return
		}
		for i, r := range b.Records {
			if err := r.Validate(); err != nil {
				t.Fatalf("accepted record %d fails Validate: %v", i, err)
			}
		}
	})
}
