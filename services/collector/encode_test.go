package collector_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"threatview/collector"
	"threatview/platform/wire"
)

// stdJSON is what encoding/json writes for ev (HTML escaping off, as the
// wire format is not HTML).
func stdJSON(t testing.TB, ev *wire.Event) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatalf("encode: %v", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func compact(t testing.TB, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("AppendEvent wrote invalid JSON %s: %v", b, err)
	}
	return out.Bytes()
}

func TestAppendEvent(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	orig := at.Add(-time.Hour)
	tests := []wire.Event{
		{ID: "x", Type: "t", ReceivedAt: at, OccurredAt: at, App: wire.App{ID: "a"}, Country: "ZZ"},
		{ID: "x", Type: "t", ReceivedAt: at, OccurredAt: at, OriginalOccurredAt: &orig, SentAt: &orig,
			App:     wire.App{ID: "a", Version: "1.2"},
			Device:  wire.Device{ID: "d", Model: "Pixel \"8\"", Manufacturer: "G\\oogle", OS: "android", OSVersion: "14"},
			Country: "AU", ClientIP: "1.0.0.10", TokenID: "tok", RequestID: "r",
			Threats: json.RawMessage(`[{"kind":"root"}]`), Attributes: json.RawMessage(`{"k":"<v&>"}`)},
		{ID: "x", Type: "a\x00b\x1f\n\r\t\b\f", ReceivedAt: at, OccurredAt: at, App: wire.App{ID: "é€😀\u2028\u2029<>&"}, Device: wire.Device{OSVersion: "only"}, Country: "ZZ"},
		{ID: "x", Type: "bad\xffutf8\xc3", ReceivedAt: at, OccurredAt: at.In(time.FixedZone("x", 3600)), App: wire.App{ID: "a"}, Country: "ZZ"},
	}
	for i := range tests {
		got := collector.AppendEvent(nil, &tests[i])
		want := stdJSON(t, &tests[i])
		if !bytes.Equal(compact(t, got), want) {
			t.Errorf("AppendEvent =\n%s\nwant\n%s", got, want)
		}
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	at := time.Now()
	ev := wire.Event{ID: "0190f0a8-1234-7abc-8def-0123456789ab", Type: "app.startup", ReceivedAt: at, OccurredAt: at,
		App: wire.App{ID: "demo-app", Version: "1.0"}, Device: wire.Device{Model: "Pixel 8", Manufacturer: "Google", OS: "android", OSVersion: "14"},
		Country: "AU", ClientIP: "1.0.0.10", TokenID: "0190f0a8-1234-7abc-8def-0123456789ab", RequestID: "0190f0a8-1234-7abc-8def-0123456789ab",
		Threats: json.RawMessage(`[]`)}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = collector.AppendEvent(buf[:0], &ev)
	}
}
