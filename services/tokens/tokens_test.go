package tokens_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"threatview/tokens"
)

func TestNewPlain(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		plain, hash, err := tokens.NewPlain()
		if err != nil {
			t.Fatalf("NewPlain() error: %v", err)
		}
		if !strings.HasPrefix(plain, tokens.Prefix) || len(plain) != tokens.PlainLen {
			t.Fatalf("NewPlain() = %q, want %s and %d characters", plain, tokens.Prefix, tokens.PlainLen)
		}
		if !tokens.WellFormed(plain) {
			t.Fatalf("WellFormed(%q) = false for a fresh token", plain)
		}
		if hash != tokens.HashPlain(plain) {
			t.Fatalf("NewPlain() hash %x, want HashPlain = %x", hash, tokens.HashPlain(plain))
		}
		if seen[plain] {
			t.Fatalf("NewPlain() repeated %q", plain)
		}
		seen[plain] = true
	}
}

func TestWellFormed(t *testing.T) {
	good, _, _ := tokens.NewPlain()
	tests := []struct {
		in   string
		want bool
	}{
		{good, true},
		{"tvk_" + strings.Repeat("A", 43), true},
		{"tvk_" + strings.Repeat("A", 42), false},
		{"tvk_" + strings.Repeat("A", 44), false},
		{"tvx_" + strings.Repeat("A", 43), false},
		{"tvk_" + strings.Repeat("A", 42) + "=", false},
		{"tvk_" + strings.Repeat("A", 42) + "+", false},
		{"", false},
		{hex.EncodeToString(make([]byte, 32)), false},
	}
	for _, tt := range tests {
		if got := tokens.WellFormed(tt.in); got != tt.want {
			t.Errorf("WellFormed(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidateAppID(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"demo-app", true},
		{"com.example.App_2", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"with space", false},
		{"slash/app", false},
		{"ünicode", false},
	}
	for _, tt := range tests {
		err := tokens.ValidateAppID(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateAppID(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && !errors.Is(err, tokens.ErrInvalid) {
			t.Errorf("ValidateAppID(%q) = %v, want ErrInvalid", tt.in, err)
		}
	}
}

func TestParseID(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5b6a", "0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5b6a", true},
		{"0B0B2D6E-7A8F-4C3E-9D2A-1F2E3D4C5B6A", "0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5b6a", true},
		{"0b0b2d6e7a8f4c3e9d2a1f2e3d4c5b6a", "", false},
		{"{0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5b6}", "", false},
		{"not-a-uuid", "", false},
		{"0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5bzz", "", false},
	}
	for _, tt := range tests {
		got, err := tokens.ParseID(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseID(%q) = %q, %v, want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, tokens.ErrMalformed) {
			t.Errorf("ParseID(%q) = %v, want ErrMalformed", tt.in, err)
		}
	}
}

func FuzzWellFormed(f *testing.F) {
	good, _, _ := tokens.NewPlain()
	for _, s := range []string{good, "", "tvk_", "tvk_" + strings.Repeat("-", 43), "tvk_" + strings.Repeat("é", 22)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !tokens.WellFormed(s) {
			return
		}
		if len(s) != tokens.PlainLen || !strings.HasPrefix(s, tokens.Prefix) {
			t.Fatalf("WellFormed(%q) = true for a string of the wrong shape", s)
		}
		if strings.ContainsAny(s[len(tokens.Prefix):], "+/=. \n") {
			t.Fatalf("WellFormed(%q) = true with a non-base64url character", s)
		}
	})
}
