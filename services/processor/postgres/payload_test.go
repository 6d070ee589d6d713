package postgres

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"threatview/platform/wire"
)

// FuzzAppendPayload: from valid JSON parts the payload is valid JSON holding
// exactly those parts.
func FuzzAppendPayload(f *testing.F) {
	f.Add(`[{"type":"root"}]`, `{"k":"v"}`, true)
	f.Add(``, ``, false)
	f.Add(`null`, `[]`, true)
	f.Fuzz(func(t *testing.T, threats, attributes string, times bool) {
		for _, s := range []string{threats, attributes} {
			if s != "" && !json.Valid([]byte(s)) {
				return
			}
		}
		e := wire.Event{Threats: json.RawMessage(threats), Attributes: json.RawMessage(attributes)}
		if times {
			ts := time.Date(2026, 11, 30, 12, 0, 0, 5, time.FixedZone("x", 3600))
			e.SentAt, e.OriginalOccurredAt = &ts, &ts
		}
		out := appendPayload(nil, &e)
		want := 0
		for _, s := range []string{threats, attributes} {
			if s != "" && s != "null" {
				want++
			}
		}
		if times {
			want += 2
		}
		if want == 0 {
			if out != nil {
				t.Fatalf("payload = %q, want nil", out)
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("payload %q is not a JSON object: %v", out, err)
		}
		if len(m) != want {
			t.Fatalf("payload %q has %d fields, want %d", out, len(m), want)
		}
		if times && string(m["sent_at"]) != `"2026-11-30T11:00:00.000000005Z"` {
			t.Fatalf("sent_at = %s, want UTC RFC 3339", m["sent_at"])
		}
	})
}

func FuzzParseUUID(f *testing.F) {
	f.Add("0190f3c4-1c2d-7a8b-9c0d-1e2f3a4b5c6d")
	f.Add("0190F3C4-1C2D-7A8B-9C0D-1E2F3A4B5C6D")
	f.Add("0190f3c4x1c2d-7a8b-9c0d-1e2f3a4b5c6d")
	f.Fuzz(func(t *testing.T, s string) {
		u, ok := parseUUID(s)
		if !ok {
			return
		}
		b := u.Bytes
		got := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
		if len(s) != 36 || !equalFold(got, s) {
			t.Fatalf("parseUUID(%q) = %s", s, got)
		}
	})
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= y && y <= 'F' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
