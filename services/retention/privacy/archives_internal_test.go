package privacy

import "testing"

// mayHold may say "maybe" too often, never "no" for a line that holds the
// value: a device id that exporters escape differently is always "maybe".
func TestMayHold(t *testing.T) {
	for _, c := range []struct {
		v, line string
		want    bool
	}{
		{"d-1", `{"app_id":"a","device_id":"d-1","n":1}`, true},
		{"d-1", `{"app_id":"a","device_id":"d-10"}`, false},
		{"d-1", `{"app_id":"a","device_id":"xd-1"}`, false},
		{"d<1>", `{"device_id":"d\u003c1\u003e"}`, true},
		{"d<1>", `{"device_id":"other"}`, true},
		{"żółw", `{"device_id":"\u017c\u00f3\u0142w"}`, true},
		{`a"b`, `{"device_id":"a\"b"}`, true},
		{`a\b`, `{"device_id":"a\\b"}`, true},
	} {
		if got := mayHold(c.v)([]byte(c.line)); got != c.want {
			t.Errorf("mayHold(%q)(%s) = %v, want %v", c.v, c.line, got, c.want)
		}
	}
}
