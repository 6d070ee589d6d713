package mariadb

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendJSONString: every valid UTF-8 text column value renders as a
// JSON string that decodes back to the same value, so restore gets it back.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "new\nline\ttab\r", "\x00\x01\x1f\x7f", "żółw ✓ 🐢", "</script>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip()
		}
		out := appendJSONString(nil, []byte(s))
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s, not JSON: %v", s, out, err)
		}
		if got != s {
			t.Errorf("appendJSONString(%q) decodes to %q", s, got)
		}
	})
}
