package wire_test

import (
	"testing"

	"threatview/platform/wire"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is 2 bytes: never half of it
		{"日本", 4, "日"},
		{"日本", 0, ""},
	}
	for _, tt := range tests {
		if got := wire.Truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
