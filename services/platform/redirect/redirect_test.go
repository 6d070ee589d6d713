package redirect

import "testing"

func TestLocal(t *testing.T) {
	ok := []string{
		"/", "/tokens", "/audit?from=2026-01-01T00:00:00Z&to=x", "/dashboards#top", "/a/b/../c",
		"/tokens/apps/demo%20app", "/?next=//evil.example",
	}
	for _, next := range ok {
		if got, good := Local(next); !good || got != next {
			t.Errorf("Local(%q) = %q, %v, want %q, true", next, got, good, next)
		}
	}
	bad := []string{
		"", "tokens", "//evil.example", "///evil.example", "/\\evil.example", "\\\\evil.example",
		"/\t/evil.example", "/\n/evil.example", "/\r/evil.example", "\t//evil.example", " //evil.example",
		"/ /evil.example", "/\x00/evil.example", "/\x7f", "/%2F%2Fevil.example", "/%2f/evil.example",
		"/%5Cevil.example", "/%09/evil.example", "/%0d%0a/evil.example", "/%zz",
		"https://evil.example/", "http:evil.example", "javascript:alert(1)", "//user@evil.example",
		"https:/evil.example", "/\u00a0/evil.example", "/\u2028x", "/\ufeff/evil.example",
	}
	for _, next := range bad {
		if got, good := Local(next); good || got != "/" {
			t.Errorf("Local(%q) = %q, %v, want \"/\", false", next, got, good)
		}
	}
}

func FuzzLocal(f *testing.F) {
	for _, s := range []string{"/", "//evil", "/\t/evil", "/%2F%2Fevil", "https://evil", "/ok?x=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got, ok := Local(next)
		if !ok {
			if got != "/" {
				t.Fatalf("Local(%q) refused but returned %q", next, got)
			}
			return
		}
		if got != next || len(got) == 0 || got[0] != '/' || (len(got) > 1 && (got[1] == '/' || got[1] == '\\')) {
			t.Fatalf("Local(%q) = %q accepted", next, got)
		}
		for _, r := range got {
			if r < ' ' || r == '\\' {
				t.Fatalf("Local(%q) accepted a control character or backslash", next)
			}
		}
	})
}
