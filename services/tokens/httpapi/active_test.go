package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type activeList struct {
	Tokens []struct {
		TokenSHA256 string `json:"token_sha256"`
		TokenID     string `json:"token_id"`
		AppID       string `json:"app_id"`
	} `json:"tokens"`
}

// TestAPI_Active: the warm-up list names every active token by its hash,
// most recently used or created first, never a revoked one and never a
// plain token; only the internal key may read it.
func TestAPI_Active(t *testing.T) {
	e := newEnv(t, "")
	old := e.create(t, "warm-a", "")
	revoked := e.create(t, "warm-b", "")
	newest := e.create(t, "warm-c", "")
	if status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+revoked.ID, adminKey, ""); status != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", status, raw)
	}

	status, raw := e.do(t, http.MethodGet, "/v1/introspect/active", internalKey, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/introspect/active = %d %s, want 200", status, raw)
	}
	for _, c := range []created{old, revoked, newest} {
		if strings.Contains(string(raw), c.Token) {
			t.Fatalf("active list holds a plain token: %s", raw)
		}
	}
	var got activeList
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	hash := func(plain string) string { h := sha256.Sum256([]byte(plain)); return hex.EncodeToString(h[:]) }
	if len(got.Tokens) != 2 || got.Tokens[0].TokenID != newest.ID || got.Tokens[1].TokenID != old.ID {
		t.Fatalf("active = %s, want %s then %s", raw, newest.ID, old.ID)
	}
	if got.Tokens[0].TokenSHA256 != hash(newest.Token) || got.Tokens[0].AppID != "warm-c" {
		t.Fatalf("active[0] = %+v, want the hash and app of %s", got.Tokens[0], newest.ID)
	}

	// A use moves a token to the front.
	e.introspect(t, old.Token)
	e.svc.FlushLastUsed(t.Context())
	_, raw = e.do(t, http.MethodGet, "/v1/introspect/active?limit=1", internalKey, "")
	if err := json.Unmarshal(raw, &got); err != nil || len(got.Tokens) != 1 || got.Tokens[0].TokenID != old.ID {
		t.Fatalf("active?limit=1 after a use of %s = %s", old.ID, raw)
	}

	for _, tt := range []struct {
		name, key, query string
		status           int
		code             string
	}{
		{"AdminKey", adminKey, "", 401, "unauthorized"},
		{"AppToken", newest.Token, "", 401, "unauthorized"},
		{"LimitZero", internalKey, "?limit=0", 400, "invalid_query"},
		{"LimitHuge", internalKey, "?limit=100001", 400, "invalid_query"},
		{"LimitText", internalKey, "?limit=all", 400, "invalid_query"},
		{"UnknownParam", internalKey, "?app_id=x", 400, "invalid_query"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := e.do(t, http.MethodGet, "/v1/introspect/active"+tt.query, tt.key, "")
			if code := wantError(t, tt.name, status, tt.status, raw); code != tt.code {
				t.Fatalf("code = %q, want %q", code, tt.code)
			}
		})
	}
}
