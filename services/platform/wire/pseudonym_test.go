package wire

import (
	"strings"
	"testing"
)

func TestParsePseudonymKeys(t *testing.T) {
	const k1 = "k1:000102030405060708090a0b0c0d0e0f"
	const k0 = "k0:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"
	t.Run("OK", func(t *testing.T) {
		p, err := ParsePseudonymKeys(k1 + "," + k0)
		if err != nil {
			t.Fatal(err)
		}
		a := p.Pseudonym("alice@example.com")
		if !strings.HasPrefix(a, "k1:") || !IsPseudonym(a) || strings.Contains(a, "alice") {
			t.Errorf("Pseudonym = %q, want k1:<32 hex>", a)
		}
		if b := p.Pseudonym("alice@example.com"); b != a {
			t.Errorf("Pseudonym not stable: %q, %q", a, b)
		}
		if p.Pseudonym("bob") == a {
			t.Error("two ids share a pseudonym")
		}
		all := p.All("alice@example.com")
		old, _ := ParsePseudonymKeys(k0)
		if len(all) != 2 || all[0] != a || all[1] != old.Pseudonym("alice@example.com") {
			t.Errorf("All = %v, want the pseudonyms under k1 then k0", all)
		}
	})
	t.Run("Blank", func(t *testing.T) {
		if p, err := ParsePseudonymKeys(" "); p != nil || err != nil {
			t.Errorf("ParsePseudonymKeys(blank) = %v, %v, want nil, nil", p, err)
		}
	})
	for _, bad := range []string{"nokey", "k1:zz", "k1:0001", ":000102030405060708090a0b0c0d0e0f", k1 + "," + k1} {
		t.Run("Bad", func(t *testing.T) {
			_, err := ParsePseudonymKeys(bad)
			if err == nil {
				t.Fatalf("ParsePseudonymKeys(%q) = nil error, want one", bad)
			}
			if strings.Contains(err.Error(), "0102030405") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}
