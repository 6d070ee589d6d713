package cli

import "testing"

func TestIsVersionRequest(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{nil, false},
		{[]string{"--version", "extra"}, false},
		{[]string{"-db", "all"}, false},
		{[]string{"version"}, false},
	} {
		if got := IsVersionRequest(tc.args); got != tc.want {
			t.Errorf("IsVersionRequest(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
