package processor_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"threatview/platform/wire"
	"threatview/processor"
)

func TestCheckStorable(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ok := func() wire.Event {
		return wire.Event{
			ID: "0190f3c4-1c2d-7a8b-9c0d-1e2f3a4b5c6d", Type: "app.startup", App: wire.App{ID: "a"}, ReceivedAt: now,
			Country: "DE", Threats: json.RawMessage(`["x"]`), Attributes: json.RawMessage(`{"k":"a\\u0000b"}`),
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*wire.Event)
		want   string // "" = storable; else part of the error
	}{
		{"OK", func(*wire.Event) {}, ""},
		{"EscapedBackslashBeforeU0000", func(e *wire.Event) { e.Threats = json.RawMessage(`["\\\\u0000"]`) }, ""},
		{"NULInText", func(e *wire.Event) { e.Device.Model = "a\x00b" }, "device.model"},
		{"InvalidUTF8InText", func(e *wire.Event) { e.Type = "\xff" }, "type"},
		{"NULEscapeInJSON", func(e *wire.Event) { e.Attributes = json.RawMessage(`{"k":"\u0000"}`) }, "attributes"},
		{"NULEscapeAfterEscapedBackslash", func(e *wire.Event) { e.Threats = json.RawMessage(`["\\\u0000"]`) }, "threats"},
		{"InvalidUTF8InJSON", func(e *wire.Event) { e.Threats = json.RawMessage("[\"\xff\"]") }, "threats"},
		{"LoneHighSurrogate", func(e *wire.Event) { e.Attributes = json.RawMessage(`{"k":"\ud800"}`) }, "attributes"},
		{"LoneLowSurrogate", func(e *wire.Event) { e.Threats = json.RawMessage(`["\udc00x"]`) }, "threats"},
		{"HighSurrogateThenNonSurrogate", func(e *wire.Event) { e.Threats = json.RawMessage(`["\ud800\u0041"]`) }, "threats"},
		{"SurrogatePairIsFine", func(e *wire.Event) { e.Threats = json.RawMessage(`["\ud83d\ude00"]`) }, ""},
		{"NumberBeyondNumeric", func(e *wire.Event) { e.Attributes = json.RawMessage(`{"n":1e200000}`) }, "attributes"},
		{"NumberInStringIsText", func(e *wire.Event) { e.Attributes = json.RawMessage(`{"n":"1e200000"}`) }, ""},
		{"ReceivedAYearAgo", func(e *wire.Event) { e.ReceivedAt = now.Add(-processor.MaxReceivedAge + time.Second) }, ""},
		{"ReceivedTooLongAgo", func(e *wire.Event) { e.ReceivedAt = now.Add(-processor.MaxReceivedAge - time.Second) }, "received_at"},
		{"ReceivedInTheFuture", func(e *wire.Event) { e.ReceivedAt = now.Add(processor.MaxReceivedAhead + time.Second) }, "received_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ok()
			tc.change(&e)
			err := processor.CheckStorable(&e, now)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckStorable = %v, want nil", err)
			case tc.want != "" && (!errors.Is(err, processor.ErrUnstorable) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckStorable = %v, want ErrUnstorable naming %s", err, tc.want)
			}
		})
	}
}

// FuzzCheckStorable: whatever CheckStorable lets through has no NUL in its
// decoded JSON strings and is valid UTF-8 (what jsonb requires).
func FuzzCheckStorable(f *testing.F) {
	for _, s := range []string{`["a"]`, `{"k":"\u0000"}`, `["\\u0000"]`, `["\\\u0000"]`, `"\u00000"`, `{"\u0000":1}`, `[1e131072]`, `[0.5e-16382]`, `["\ud800"]`, `["\ud83d\ude00"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return
		}
		now := time.Now()
		e := wire.Event{ReceivedAt: now, Attributes: json.RawMessage(raw)}
		if processor.CheckStorable(&e, now) != nil {
			return
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("valid JSON %q does not decode: %v", raw, err)
		}
		if hasNUL(v) {
			t.Fatalf("CheckStorable let through %q, which holds a NUL", raw)
		}
	})
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, x := range v {
			if hasNUL(x) {
				return true
			}
		}
	case map[string]any:
		for k, x := range v {
			if strings.ContainsRune(k, 0) || hasNUL(x) {
				return true
			}
		}
	}
	return false
}
