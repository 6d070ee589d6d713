package identity

import "testing"

// FuzzParsePHC feeds arbitrary stored hashes to the parser: it never panics
// and never accepts parameters that would make argon2 allocate without bound.
func FuzzParsePHC(f *testing.F) {
	f.Add("$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U")
	f.Add("$argon2id$v=19$m=99999999,t=1,p=1$c2FsdA$a2V5")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p, salt, key, err := parsePHC(s)
		if err != nil {
			return
		}
		if p.MemoryKiB > 1<<20 || p.Time > 64 || p.Threads < 1 || len(salt) < 8 || len(key) < 16 {
			t.Fatalf("parsePHC(%q) accepted %+v", s, p)
		}
	})
}
