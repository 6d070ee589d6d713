package collector_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
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
			Device:  wire.Device{ID: "d", Model: "Pixel \"8\"", Manufacturer: "G\\oogle", OS: "android", OSVersion: "14", Language: "en-GB"},
			Session: &wire.Session{ID: "s\"1"}, User: &wire.User{Pseudonym: "k1:00ff"}, Location: &wire.Location{Lat: -33.9, Lon: 151.2},
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

// TestAppendEvent_Property fills every field of wire.Event, found by
// reflection, with random values full of edge cases (escapes, invalid
// UTF-8, zones, nanoseconds, absent optional fields) and checks that
// AppendEvent writes what encoding/json writes. A field added to wire.Event
// that AppendEvent forgets fails here; a field of a new kind fails the
// generator until it learns the kind.
func TestAppendEvent_Property(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		var ev wire.Event
		fill(t, r, reflect.ValueOf(&ev).Elem(), "Event")
		got := collector.AppendEvent(nil, &ev)
		if want := stdJSON(t, &ev); !bytes.Equal(compact(t, got), want) {
			t.Fatalf("AppendEvent =\n%s\nwant (encoding/json)\n%s", got, want)
		}
	}
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// fill sets v, and every field inside it, to a random value; empty values
// are likely, so omitempty is exercised too.
func fill(t *testing.T, r *rand.Rand, v reflect.Value, path string) {
	t.Helper()
	switch {
	case v.Type() == timeType:
		zones := []*time.Location{time.UTC, time.FixedZone("", 3600), time.FixedZone("", -9*3600-1800), time.FixedZone("", 14*3600)}
		nsec := []int{0, 1, 100, 123456789, 999999999, 500000000}[r.IntN(6)]
		v.Set(reflect.ValueOf(time.Date(r.IntN(10000), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), nsec, zones[r.IntN(len(zones))])))
	case v.Type() == rawType:
		raws := []string{"", "", `[]`, `{}`, `[{"kind":"root"}]`, `{"k":"<v&>","n":1e400}`, `[null,true,"\u2028é"]`, `{"a":{"b":[1,2,{"c":"\ud83d\ude00"}]}}`}
		if s := raws[r.IntN(len(raws))]; s != "" {
			v.Set(reflect.ValueOf(json.RawMessage(s)))
		}
	case v.Kind() == reflect.String:
		parts := []string{"a", "Z", "\x00", "\x1f", "\n", "\t", "\"", "\\", "<", ">", "&", "é", "€", "😀", "\u2028", "\u2029", "\xff", "\xc3", "\x7f", " ", "/"}
		var b []byte
		for range r.IntN(6) {
			b = append(b, parts[r.IntN(len(parts))]...)
		}
		v.SetString(string(b))
	case v.Kind() == reflect.Float64:
		floats := []float64{0, -0.1, 48.1, -180, 90, 11.500000000000002, 1e-7, -3.2e-9, 123.456789}
		v.SetFloat(floats[r.IntN(len(floats))])
	case v.Kind() == reflect.Pointer:
		if r.IntN(2) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(t, r, p.Elem(), path)
		v.Set(p)
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, r, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	default:
		t.Fatalf("%s is a %s: teach the generator (and AppendEvent) this kind", path, v.Type())
	}
}

// BenchmarkAppendEvent_JSON is encoding/json on the event of
// BenchmarkAppendEvent, the figure the hand encoder must beat to be kept.
func BenchmarkAppendEvent_JSON(b *testing.B) {
	at := time.Now()
	ev := wire.Event{ID: "0190f0a8-1234-7abc-8def-0123456789ab", Type: "app.startup", ReceivedAt: at, OccurredAt: at,
		App: wire.App{ID: "demo-app", Version: "1.0"}, Device: wire.Device{Model: "Pixel 8", Manufacturer: "Google", OS: "android", OSVersion: "14"},
		Country: "AU", ClientIP: "1.0.0.10", TokenID: "0190f0a8-1234-7abc-8def-0123456789ab", RequestID: "0190f0a8-1234-7abc-8def-0123456789ab",
		Threats: json.RawMessage(`[]`)}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(&ev); err != nil {
			b.Fatal(err)
		}
	}
}
