package collector_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"threatview/collector"
	"threatview/platform/wire"
)

const validEvent = `{"type":"app.startup","occurred_at":"2026-01-02T03:04:05Z","app":{"id":"a1","version":"1.0"},"device":{"model":"Pixel 8","os":"android"},"threats":[{"type":"root"}],"attributes":{"k":"v"}}`

func TestDecode(t *testing.T) {
	t.Run("OK single", func(t *testing.T) {
		in, err := collector.Decode([]byte(validEvent))
		if err != nil {
			t.Fatalf("Decode = %v", err)
		}
		if len(in) != 1 || in[0].Type != "app.startup" || in[0].App.ID != "a1" || in[0].Device.Model != "Pixel 8" {
			t.Fatalf("Decode = %+v", in)
		}
		if string(in[0].Threats) != `[{"type":"root"}]` || string(in[0].Attributes) != `{"k":"v"}` {
			t.Fatalf("raw fields = %s %s", in[0].Threats, in[0].Attributes)
		}
	})
	t.Run("OK batch", func(t *testing.T) {
		in, err := collector.Decode([]byte(`{"events":[` + validEvent + `,{"type":"x","app":{"id":"a1"},"event_id":"0190F0A8-1234-7ABC-8DEF-0123456789AB"}]}`))
		if err != nil {
			t.Fatalf("Decode = %v", err)
		}
		if len(in) != 2 || in[1].EventID != "0190f0a8-1234-7abc-8def-0123456789ab" {
			t.Fatalf("Decode = %+v", in)
		}
	})

	tests := []struct {
		name  string
		body  string
		want  error
		index int
		field string
	}{
		{"ErrMalformed syntax", `{"type":`, collector.ErrMalformed, 0, ""},
		{"ErrMalformed empty", ``, collector.ErrMalformed, 0, ""},
		{"ErrMalformed trailing", validEvent + `{}`, collector.ErrMalformed, 0, ""},
		{"ErrMalformed array body", `[1,2]`, collector.ErrMalformed, 0, ""},
		{"ErrInvalid missing type", `{"app":{"id":"a"}}`, collector.ErrInvalid, -1, "type"},
		{"ErrInvalid missing app", `{"type":"t"}`, collector.ErrInvalid, -1, "app.id"},
		{"ErrInvalid unknown field", `{"type":"t","app":{"id":"a"},"colour":"red"}`, collector.ErrInvalid, -1, "colour"},
		{"ErrInvalid wrong type", `{"type":5,"app":{"id":"a"}}`, collector.ErrInvalid, -1, "type"},
		{"ErrInvalid wrong nested type", `{"type":"t","app":{"id":7}}`, collector.ErrInvalid, -1, "app.id"},
		{"ErrInvalid occurred_at", `{"type":"t","app":{"id":"a"},"occurred_at":"yesterday"}`, collector.ErrInvalid, -1, "occurred_at"},
		{"ErrInvalid sent_at", `{"type":"t","app":{"id":"a"},"sent_at":"2026-01-02 03:04:05"}`, collector.ErrInvalid, -1, "sent_at"},
		{"ErrInvalid event_id", `{"type":"t","app":{"id":"a"},"event_id":"nope"}`, collector.ErrInvalid, -1, "event_id"},
		{"ErrInvalid threats", `{"type":"t","app":{"id":"a"},"threats":{}}`, collector.ErrInvalid, -1, "threats"},
		{"ErrInvalid attributes", `{"type":"t","app":{"id":"a"},"attributes":[1]}`, collector.ErrInvalid, -1, "attributes"},
		{"ErrInvalid batch index", `{"events":[` + validEvent + `,{"type":"t"}]}`, collector.ErrInvalid, 1, "app.id"},
		{"ErrInvalid batch unknown", `{"events":[` + validEvent + `,` + validEvent + `,{"type":"t","app":{"id":"a"},"x":1}]}`, collector.ErrInvalid, 2, "x"},
		{"ErrInvalid batch element type", `{"events":[5]}`, collector.ErrInvalid, 0, ""},
		{"ErrInvalid batch empty", `{"events":[]}`, collector.ErrInvalid, -1, "events"},
		{"ErrInvalid batch mixed", `{"events":[` + validEvent + `],"type":"t"}`, collector.ErrInvalid, -1, "type"},
		{"ErrTooLarge event", `{"type":"t","app":{"id":"a"},"attributes":{"x":"` + strings.Repeat("a", collector.MaxEventBytes) + `"}}`, collector.ErrTooLarge, -1, ""},
		{"ErrTooLarge batch event", `{"events":[` + validEvent + `,{"type":"t","app":{"id":"a"},"attributes":{"x":"` + strings.Repeat("a", collector.MaxEventBytes) + `"}}]}`, collector.ErrTooLarge, 1, ""},
		{"ErrTooLarge count", `{"events":[` + strings.TrimSuffix(strings.Repeat(`{"type":"t","app":{"id":"a"}},`, collector.MaxBatchEvents+1), ",") + `]}`, collector.ErrTooLarge, -1, "events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collector.Decode([]byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, want %v", err, tt.want)
			}
			var fe *collector.FieldError
			if errors.As(err, &fe) {
				if fe.Index != tt.index || fe.Field != tt.field {
					t.Fatalf("Decode = index %d field %q, want index %d field %q (%v)", fe.Index, fe.Field, tt.index, tt.field, err)
				}
			} else if tt.want != collector.ErrMalformed {
				t.Fatalf("Decode = %v (%T), want a *FieldError", err, err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	seeds := []string{
		validEvent,
		`{"events":[` + validEvent + `,` + validEvent + `]}`,
		`{"events":[]}`,
		`{"events":null}`,
		`{"type":"t","app":{"id":"a"},"event_id":"0190f0a8-1234-7abc-8def-0123456789ab","sent_at":"2026-01-02T03:04:05.123+02:00"}`,
		`{"type":"t","app":{"id":"a"},"unknown":1}`,
		`{"type":1}`,
		`[]`, `null`, `""`, `{`, `{"events":[1,"x",null,{}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := collector.Decode(data)
		slow, slowErr := collector.DecodeCareful(data)
		if (err == nil) != (slowErr == nil) || (err != nil && err.Error() != slowErr.Error()) {
			t.Fatalf("Decode(%q) = %v, careful path = %v", data, err, slowErr)
		}
		if err == nil && !reflect.DeepEqual(in, slow) {
			t.Fatalf("Decode(%q) = %+v, careful path = %+v", data, in, slow)
		}
		if err != nil {
			if !errors.Is(err, collector.ErrMalformed) && !errors.Is(err, collector.ErrInvalid) && !errors.Is(err, collector.ErrTooLarge) {
				t.Fatalf("Decode(%q) = %v: not a sentinel", data, err)
			}
			if in != nil {
				t.Fatalf("Decode(%q) returned events with error %v", data, err)
			}
			return
		}
		if len(in) == 0 || len(in) > collector.MaxBatchEvents {
			t.Fatalf("Decode(%q) = %d events", data, len(in))
		}
		for i, e := range in {
			if e.Type == "" || e.App.ID == "" {
				t.Fatalf("Decode(%q) event %d lacks type or app.id: %+v", data, i, e)
			}
		}
		// Whatever decodes must enrich and encode to the JSON encoding/json
		// would write.
		out := make([]wire.Event, len(in))
		en := collector.NewEnricher(nil, nil)
		req := collector.Request{RemoteAddr: "192.0.2.1:1", ReceivedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := en.Enrich(req, in, out); err != nil {
			t.Fatalf("Enrich = %v", err)
		}
		for i := range out {
			got := compact(t, collector.AppendEvent(nil, &out[i]))
			if want := stdJSON(t, &out[i]); !bytes.Equal(got, want) {
				t.Fatalf("AppendEvent =\n%s\nwant\n%s", got, want)
			}
		}
	})
}

func ExampleDecode() {
	_, err := collector.Decode([]byte(`{"events":[{"type":"t","app":{"id":"a"}},{"type":"t","app":{"id":"a"},"colour":"red"}]}`))
	fmt.Println(err)
	// Output: event 1: colour: unknown field
}
