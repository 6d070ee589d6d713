package identity_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"threatview/identity"
	"threatview/platform/authz"
)

func TestHasher(t *testing.T) {
	h, err := identity.NewHasher(identity.DefaultArgon2, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hash, err := h.Hash(ctx, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Contains(hash, "horse") {
		t.Fatalf("Hash() = %q, want an argon2id PHC string with the default parameters", hash)
	}
	again, _ := h.Hash(ctx, "correct horse battery")
	if again == hash {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, c := range []struct {
		name, encoded, password string
		want                    bool
	}{
		{"OK", hash, "correct horse battery", true},
		{"Wrong", hash, "correct horse batterY", false},
		{"Empty", "", "", false},
		{"Garbage", "$argon2id$v=19$m=1,t=1,p=1$x$y", "x", false},
		{"HugeMemory", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5", "x", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, err := h.Verify(ctx, c.encoded, c.password)
			if err != nil || ok != c.want {
				t.Fatalf("Verify(%.30q) = %v, %v, want %v", c.encoded, ok, err, c.want)
			}
		})
	}
}

// TestHasher_NoEnumerationByTiming checks that verifying against no hash (an
// unknown user) costs about what a real hash costs, so response times do
// not tell which usernames exist.
func TestHasher_NoEnumerationByTiming(t *testing.T) {
	h, err := identity.NewHasher(identity.DefaultArgon2, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hash, _ := h.Hash(ctx, "correct horse battery")
	// Interleaved, so a load spike on the shared machine hits both sides;
	// without the dummy hash the ratio would be about 100, not about 1.
	var known, unknown []time.Duration
	for range 9 {
		for _, enc := range []string{hash, ""} {
			start := time.Now()
			_, _ = h.Verify(ctx, enc, "wrong password")
			if enc == "" {
				unknown = append(unknown, time.Since(start))
			} else {
				known = append(known, time.Since(start))
			}
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	k, u := median(known), median(unknown)
	if r := float64(u) / float64(k); r < 1.0/3 || r > 3 {
		t.Fatalf("verify against no hash took %s, against a real one %s: ratio %.2f, want about 1", u, k, r)
	}
}

func TestParseKeyring(t *testing.T) {
	seed := make([]byte, 32)
	seed[0] = 1
	b64 := base64.StdEncoding.EncodeToString(seed)
	other := make([]byte, 32)
	other[0] = 2
	kr, err := identity.ParseKeyring(base64.RawURLEncoding.EncodeToString(other) + ", " + b64)
	if err != nil {
		t.Fatal(err)
	}
	set := kr.JWKSet()
	if len(set.Keys) != 2 {
		t.Fatalf("JWKSet() has %d keys, want 2", len(set.Keys))
	}
	tok, err := kr.Sign(identity.User{Username: "ann", Roles: []string{"analyst"}}, time.Now(), time.Minute, "id")
	if err != nil {
		t.Fatal(err)
	}
	c, err := authz.NewVerifier(kr).Verify(context.Background(), tok)
	if err != nil || c.Username != "ann" {
		t.Fatalf("Verify(Sign()) = %+v, %v", c, err)
	}
	// The first key signs.
	first := authz.KeyID(ed25519.NewKeyFromSeed(other).Public().(ed25519.PublicKey))
	if set.Keys[0].Kid != first {
		t.Fatalf("first published kid = %s, want the signing key %s", set.Keys[0].Kid, first)
	}
	for _, bad := range []string{"", "abc", b64 + "," + b64, strings.Repeat("zz", 32)} {
		if _, err := identity.ParseKeyring(bad); err == nil {
			t.Errorf("ParseKeyring(%q) = nil error", bad)
		} else if strings.Contains(err.Error(), b64) {
			t.Errorf("ParseKeyring error shows key material: %v", err)
		}
	}
}

func TestNormalizeUsername(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"Alice", "alice", true},
		{"a.b_c-d@example.com", "a.b_c-d@example.com", true},
		{"", "", false},
		{"-a", "", false},
		{"a b", "", false},
		{"admin-key", "", false},
		{strings.Repeat("a", 65), "", false},
		{"é", "", false},
	} {
		got, err := identity.NormalizeUsername(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("NormalizeUsername(%q) = %q, %v, want %q ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, identity.ErrInvalid) {
			t.Errorf("NormalizeUsername(%q) error %v does not wrap ErrInvalid", c.in, err)
		}
	}
}

// BenchmarkHasher_Verify is the cost of one sign-in's password check with
// the default parameters.
func BenchmarkHasher_Verify(b *testing.B) {
	h, err := identity.NewHasher(identity.DefaultArgon2, 1)
	if err != nil {
		b.Fatal(err)
	}
	hash, _ := h.Hash(context.Background(), "correct horse battery")
	for b.Loop() {
		_, _ = h.Verify(context.Background(), hash, "correct horse battery")
	}
}
