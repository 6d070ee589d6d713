package collector_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"threatview/collector"
)

// The shared wire test vectors (sdk/testdata/vectors.json): every SDK reads
// the same cases, so the collector's decoder must answer them as written.
const vectorsFile = "../../sdk/testdata/vectors.json"

// vectorApp is the token's app the decoder-level cases are checked against.
const vectorApp = "vector-app"

type vectorCase struct {
	Name     string          `json:"name"`
	Body     json.RawMessage `json:"body"`
	BodyText *string         `json:"body_text"`
	Repeat   *struct {
		Count    int             `json:"count"`
		Event    json.RawMessage `json:"event"`
		PadIndex *int            `json:"pad_index"`
		PadBytes int             `json:"pad_bytes"`
	} `json:"repeat"`
	Layer   string `json:"layer"`
	Feature string `json:"feature"`
	Expect  struct {
		Status   int      `json:"status"`
		Code     string   `json:"code"`
		Field    *string  `json:"field"`
		Index    *int     `json:"index"`
		Accepted int      `json:"accepted"`
		IDs      []string `json:"ids"`
	} `json:"expect"`
}

// vectorBody builds the request body of a case as the vectors' README says.
func vectorBody(t *testing.T, c vectorCase, placeholder string) []byte {
	t.Helper()
	var b []byte
	switch {
	case c.BodyText != nil:
		b = []byte(*c.BodyText)
	case c.Repeat != nil:
		events := make([]json.RawMessage, c.Repeat.Count)
		for i := range events {
			events[i] = c.Repeat.Event
			if c.Repeat.PadIndex != nil && *c.Repeat.PadIndex == i {
				var m map[string]any
				if err := json.Unmarshal(c.Repeat.Event, &m); err != nil {
					t.Fatalf("%s: repeat.event: %v", c.Name, err)
				}
				m["attributes"] = map[string]any{"pad": strings.Repeat("x", c.Repeat.PadBytes)}
				events[i], _ = json.Marshal(m)
			}
		}
		b, _ = json.Marshal(map[string]any{"events": events})
	default:
		b = c.Body
	}
	return []byte(strings.ReplaceAll(string(b), `"`+placeholder+`"`, `"`+vectorApp+`"`))
}

// vectorStatus maps a decoder error to its HTTP status and code, as the
// collector's httpapi error table does.
func vectorStatus(err error) (int, string) {
	for _, e := range []struct {
		err    error
		status int
		code   string
	}{
		{collector.ErrMalformed, 400, "malformed_body"},
		{collector.ErrForbidden, 403, "forbidden"},
		{collector.ErrTooLarge, 413, "too_large"},
		{collector.ErrInvalid, 422, "invalid_event"},
	} {
		if errors.Is(err, e.err) {
			return e.status, e.code
		}
	}
	return 500, "internal"
}

func TestDecode_WireVectors(t *testing.T) {
	data, err := os.ReadFile(filepath.FromSlash(vectorsFile))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var doc struct {
		Format      int          `json:"format"`
		Placeholder string       `json:"app_placeholder"`
		Requests    []vectorCase `json:"requests"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse vectors: %v", err)
	}
	if doc.Format != 1 || len(doc.Requests) == 0 {
		t.Fatalf("vectors format %d with %d requests, want format 1 and some requests", doc.Format, len(doc.Requests))
	}
	// A feature's cases run once the decoder knows it: a collector without
	// it refuses its first (valid) case naming an unknown top-level field.
	missing := map[string]bool{}
	ran := 0
	for _, c := range doc.Requests {
		if c.Layer == "http" {
			continue // headers, encodings and tokens: the HTTP tests' part
		}
		t.Run(c.Name, func(t *testing.T) {
			if missing[c.Feature] {
				t.Skipf("the decoder does not know feature %q yet", c.Feature)
			}
			in, err := collector.Decode(vectorBody(t, c, doc.Placeholder))
			if err == nil {
				err = collector.CheckApp(in, vectorApp)
			}
			var fe *collector.FieldError
			if c.Feature != "" && c.Expect.Status == 202 && errors.As(err, &fe) && fe.Message == "unknown field" && !strings.Contains(fe.Field, ".") {
				missing[c.Feature] = true
				t.Skipf("the decoder does not know feature %q yet (%v)", c.Feature, err)
			}
			ran++
			if c.Expect.Status == 202 {
				if err != nil {
					t.Fatalf("Decode = %v, want accepted", err)
				}
				if len(in) != c.Expect.Accepted {
					t.Fatalf("Decode returned %d events, want %d", len(in), c.Expect.Accepted)
				}
				for i, id := range c.Expect.IDs {
					if in[i].EventID != id {
						t.Errorf("event %d: event_id = %q, want %q", i, in[i].EventID, id)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode accepted %d events, want %d %s", len(in), c.Expect.Status, c.Expect.Code)
			}
			if status, code := vectorStatus(err); status != c.Expect.Status || code != c.Expect.Code {
				t.Fatalf("Decode = %v (%d %s), want %d %s", err, status, code, c.Expect.Status, c.Expect.Code)
			}
			if c.Expect.Field == nil && c.Expect.Index == nil {
				return
			}
			if !errors.As(err, &fe) {
				t.Fatalf("Decode = %v, want a field error", err)
			}
			if c.Expect.Field != nil && fe.Field != *c.Expect.Field {
				t.Errorf("field = %q, want %q (%v)", fe.Field, *c.Expect.Field, err)
			}
			if c.Expect.Index != nil && fe.Index != *c.Expect.Index {
				t.Errorf("index = %d, want %d (%v)", fe.Index, *c.Expect.Index, err)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no vector ran")
	}
}
