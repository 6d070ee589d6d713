package wire_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"threatview/platform/wire"
)

func eventJSON(t testing.TB, mutate func(*wire.Event)) string {
	e := validEvent()
	if mutate != nil {
		mutate(&e)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

func v2(requests ...string) []byte {
	parts := make([]string, len(requests))
	for i, r := range requests {
		parts[i] = wire.RequestPrefix + r + wire.RequestSuffix
	}
	return []byte(wire.EventsPrefix + strings.Join(parts, ",") + wire.EventsSuffix)
}

func TestDecodeEvents(t *testing.T) {
	good := eventJSON(t, func(e *wire.Event) { e.RequestID = "r1"; e.App.ID = "good" })
	good2 := eventJSON(t, func(e *wire.Event) { e.RequestID = "r3"; e.ID = "0193a4c2-7e1f-7c3a-9b2d-5e6f7a8b9c0e" })
	badTime := strings.Replace(eventJSON(t, func(e *wire.Event) { e.RequestID = "r2"; e.App.ID = "bad" }),
		`"occurred_at":"2026-11-30T12:00:00Z"`, `"occurred_at":"-0074-12-01T04:06:49Z"`, 1)
	deep := strings.Replace(eventJSON(t, func(e *wire.Event) { e.RequestID = "r4"; e.Threats = json.RawMessage(`["X"]`) }),
		`["X"]`, strings.Repeat("[", 20000)+strings.Repeat("]", 20000), 1)

	t.Run("OK v2 isolates each request", func(t *testing.T) {
		reqs, err := wire.DecodeEvents(v2(good+","+good, badTime, deep, good2))
		if err != nil {
			t.Fatalf("DecodeEvents = %v", err)
		}
		if len(reqs) != 4 {
			t.Fatalf("DecodeEvents = %d requests, want 4", len(reqs))
		}
		if reqs[0].Err != nil || len(reqs[0].Events) != 2 || reqs[0].AppID != "good" || reqs[0].RequestID != "r1" {
			t.Errorf("request 0 = %+v", reqs[0])
		}
		for _, i := range []int{1, 2} {
			if !errors.Is(reqs[i].Err, wire.ErrInvalidEnvelope) || reqs[i].Events != nil {
				t.Errorf("request %d err = %v, events %d; want ErrInvalidEnvelope and none", i, reqs[i].Err, len(reqs[i].Events))
			}
		}
		if reqs[1].AppID != "bad" || reqs[1].RequestID != "r2" {
			t.Errorf("request 1 names = %q %q, want bad r2", reqs[1].AppID, reqs[1].RequestID)
		}
		if reqs[3].Err != nil || len(reqs[3].Events) != 1 {
			t.Errorf("request 3 = %+v", reqs[3])
		}
		// The dead-letter body of a request is a message of its own.
		again, err := wire.DecodeEvents(reqs[0].Body())
		if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0].Events, reqs[0].Events) {
			t.Errorf("DecodeEvents(Body()) = %+v, %v", again, err)
		}
		if string(reqs[1].Body()) != string(v2(badTime)) {
			t.Errorf("Body() = %s, want the request alone", reqs[1].Body())
		}
	})
	t.Run("OK v1 grouped by request id", func(t *testing.T) {
		body := `{"v":1,"events":[` + good + `,` + good + `,` + badTime + `,` + good2 + `]}`
		reqs, err := wire.DecodeEvents([]byte(body))
		if err != nil {
			t.Fatalf("DecodeEvents = %v", err)
		}
		if len(reqs) != 3 || len(reqs[0].Events) != 2 || reqs[1].Err == nil || len(reqs[2].Events) != 1 {
			t.Fatalf("DecodeEvents = %+v", reqs)
		}
		if string(reqs[1].Body()) != `{"v":1,"events":[`+badTime+`]}` {
			t.Errorf("Body() = %s", reqs[1].Body())
		}
	})
	t.Run("OK v2 not framed by the collector", func(t *testing.T) {
		reqs, err := wire.DecodeEvents([]byte(` { "requests" : [ {"events":[` + good + `]} ], "v": 2 }`))
		if err != nil || len(reqs) != 1 || reqs[0].Err != nil {
			t.Fatalf("DecodeEvents = %+v, %v", reqs, err)
		}
	})
	for name, body := range map[string]string{
		"ErrNoRequests":  wire.EventsPrefix + wire.EventsSuffix,
		"ErrVersion":     `{"v":3,"requests":[]}`,
		"ErrNotJSON":     `{"v":`,
		"ErrEmptyV1":     `{"v":1,"events":[]}`,
		"ErrDeepV1Whole": `{"v":1,"events":[` + strings.Repeat("[", 20000) + `]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := wire.DecodeEvents([]byte(body)); !errors.Is(err, wire.ErrInvalidEnvelope) {
				t.Fatalf("DecodeEvents(%.60s) = %v, want ErrInvalidEnvelope", body, err)
			}
		})
	}
}

// FuzzDecodeEvents checks that no input panics the splitter and that every
// request it accepts decodes again, alone, from its dead-letter body.
func FuzzDecodeEvents(f *testing.F) {
	ev, _ := json.Marshal(validEvent())
	f.Add(v2(string(ev), string(ev)+","+string(ev)))
	f.Add([]byte(`{"v":1,"events":[` + string(ev) + `]}`))
	f.Add([]byte(wire.EventsPrefix + `{"events":["\"],[` + wire.EventsSuffix))
	f.Add([]byte(wire.EventsPrefix + `,,]` + wire.EventsSuffix))
	f.Fuzz(func(t *testing.T, body []byte) {
		reqs, err := wire.DecodeEvents(body)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalidEnvelope) {
				t.Fatalf("error %v does not wrap ErrInvalidEnvelope", err)
			}
			return
		}
		for i, r := range reqs {
			if r.Err != nil {
				if !errors.Is(r.Err, wire.ErrInvalidEnvelope) || r.Events != nil {
					t.Fatalf("request %d: err %v with %d events", i, r.Err, len(r.Events))
				}
				continue
			}
			again, err := wire.DecodeEvents(r.Body())
			if err != nil || len(again) != 1 || again[0].Err != nil || len(again[0].Events) != len(r.Events) {
				t.Fatalf("request %d does not decode alone from %q: %v", i, r.Body(), err)
			}
		}
	})
}
