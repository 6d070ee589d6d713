package authz_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"threatview/platform/authz"
)

func mustKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

func mustSign(t *testing.T, priv ed25519.PrivateKey, user string, roles []string, at time.Time, ttl time.Duration) string {
	t.Helper()
	tok, err := authz.Sign(priv, user, roles, at, ttl, "jti-1")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// jwksServer serves the public keys of privs and counts fetches.
func jwksServer(t *testing.T, privs *[]ed25519.PrivateKey, fetches *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		var set authz.JWKSet
		for _, p := range *privs {
			set.Keys = append(set.Keys, authz.PublicJWK(p.Public().(ed25519.PublicKey)))
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRequire(t *testing.T) {
	cur, other := mustKey(t), mustKey(t)
	privs := []ed25519.PrivateKey{cur}
	var fetches atomic.Int32
	srv := jwksServer(t, &privs, &fetches)
	auth := authz.New(authz.NewVerifier(authz.NewJWKS(srv.URL, time.Minute, nil)), "the-admin-key", nil)
	var seen authz.Caller
	h := auth.Require(authz.RoleAuditor)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = authz.FromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	now := time.Now()
	valid := mustSign(t, cur, "alice", []string{"auditor"}, now, 5*time.Minute)
	parts := strings.Split(valid, ".")
	payload := []byte(parts[1])
	payload[len(payload)-2] ^= 1
	tampered := parts[0] + "." + string(payload) + "." + parts[2]
	tests := []struct {
		name, cred string
		want       int
		actor      string
	}{
		{"Auditor", valid, 204, "alice"},
		{"Admin", mustSign(t, cur, "root", []string{"admin"}, now, time.Minute), 204, "root"},
		{"AdminKey", "the-admin-key", 204, authz.ActorAdminKey},
		{"WrongRole", mustSign(t, cur, "bob", []string{"analyst"}, now, time.Minute), 403, ""},
		{"NoRoles", mustSign(t, cur, "bob", nil, now, time.Minute), 403, ""},
		{"Expired", mustSign(t, cur, "alice", []string{"auditor"}, now.Add(-10*time.Minute), 5*time.Minute), 401, ""},
		{"Tampered", tampered, 401, ""},
		{"UnknownKey", mustSign(t, other, "alice", []string{"auditor"}, now, time.Minute), 401, ""},
		{"Missing", "", 401, ""},
		{"WrongKey", "not-the-admin-key", 401, ""},
		{"NoneAlg", "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + ".", 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen = authz.Caller{}
			req := httptest.NewRequest("GET", "/", nil)
			if tt.cred != "" {
				req.Header.Set("Authorization", "Bearer "+tt.cred)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status = %d %s, want %d", rec.Code, rec.Body, tt.want)
			}
			if tt.want != 204 {
				var body struct{ Error struct{ Code string } }
				if json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code == "" {
					t.Fatalf("body = %s, want the JSON error", rec.Body)
				}
			}
			if seen.Actor() != tt.actor {
				t.Fatalf("actor = %q, want %q", seen.Actor(), tt.actor)
			}
		})
	}
}

func TestJWKS_Rotation(t *testing.T) {
	old, next := mustKey(t), mustKey(t)
	privs := []ed25519.PrivateKey{old}
	var fetches atomic.Int32
	srv := jwksServer(t, &privs, &fetches)
	jwks := authz.NewJWKS(srv.URL, time.Hour, nil)
	jwks.MinRefetch = 0
	v := authz.NewVerifier(jwks)
	ctx := t.Context()
	if _, err := v.Verify(ctx, mustSign(t, old, "a", []string{"admin"}, time.Now(), time.Minute)); err != nil {
		t.Fatalf("Verify(old key) = %v", err)
	}
	// The identity service rotates: next signs, old is still published.
	privs = []ed25519.PrivateKey{next, old}
	if _, err := v.Verify(ctx, mustSign(t, next, "a", []string{"admin"}, time.Now(), time.Minute)); err != nil {
		t.Fatalf("Verify(new key) = %v, want the set fetched again for the unknown kid", err)
	}
	if _, err := v.Verify(ctx, mustSign(t, old, "a", []string{"admin"}, time.Now(), time.Minute)); err != nil {
		t.Fatalf("Verify(previous key) = %v", err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2 (one at start, one for the new kid)", n)
	}
}

func TestJWKS_RefetchLimited(t *testing.T) {
	cur := mustKey(t)
	privs := []ed25519.PrivateKey{cur}
	var fetches atomic.Int32
	srv := jwksServer(t, &privs, &fetches)
	v := authz.NewVerifier(authz.NewJWKS(srv.URL, time.Hour, nil))
	for range 20 {
		if _, err := v.Verify(t.Context(), mustSign(t, mustKey(t), "a", nil, time.Now(), time.Minute)); err == nil {
			t.Fatal("Verify(unknown key) = nil, want an error")
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("fetches = %d after 20 unknown kids, want 1", n)
	}
}

func TestRequire_KeysUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nobody listens
	auth := authz.New(authz.NewVerifier(authz.NewJWKS(srv.URL, time.Minute, nil)), "k", nil)
	h := auth.Require(authz.RoleAnalyst)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+mustSign(t, mustKey(t), "ann", []string{"analyst"}, time.Now(), time.Minute))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("with the identity service away: %d (Retry-After %q), want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	// Asked again at once: refused without another fetch (no wait).
	rec = httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || time.Since(start) > time.Second {
		t.Fatalf("second try: %d after %s, want 503 at once", rec.Code, time.Since(start))
	}
	req.Header.Set("Authorization", "Bearer k")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("admin key with the identity service away: %d, want 200", rec.Code)
	}
}

// BenchmarkVerify is the cost of checking one access token (signature and
// claims) with the key cached.
func BenchmarkVerify(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	pub := priv.Public().(ed25519.PublicKey)
	v := authz.NewVerifier(authz.StaticKeys{authz.KeyID(pub): pub})
	tok, _ := authz.Sign(priv, "ann", []string{"analyst"}, time.Now(), time.Minute, "id")
	for b.Loop() {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}

// TestJWKS_StallingIdentity: an identity service that accepts the JWK set
// request and never answers must neither hold up tokens signed with a key
// already known nor be asked more than once at a time.
func TestJWKS_StallingIdentity(t *testing.T) {
	cur := mustKey(t)
	var stall atomic.Bool
	var fetches, inFlight, maxInFlight atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if stall.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_ = json.NewEncoder(w).Encode(authz.JWKSet{Keys: []authz.JWK{authz.PublicJWK(cur.Public().(ed25519.PublicKey))}})
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	jwks := authz.NewJWKS(srv.URL, 50*time.Millisecond, nil)
	jwks.MinRefetch = 0
	v := authz.NewVerifier(jwks)
	known := mustSign(t, cur, "ann", []string{"analyst"}, time.Now(), time.Minute)
	if _, err := v.Verify(t.Context(), known); err != nil {
		t.Fatalf("Verify(known key) = %v", err)
	}
	stall.Store(true)
	time.Sleep(100 * time.Millisecond) // the set is now due for a refresh

	t.Run("KnownKeyNotHeld", func(t *testing.T) {
		start := time.Now()
		errs := make(chan error, 40)
		for range 40 {
			go func() {
				_, err := v.Verify(t.Context(), known)
				errs <- err
			}()
		}
		for range 40 {
			if err := <-errs; err != nil {
				t.Fatalf("Verify(known key) with identity stalling = %v, want nil", err)
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("40 verifications with a known key took %s while identity stalled, want well under the 5 s fetch timeout", d)
		}
	})
	t.Run("UnknownKeyWaitsForItsContext", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := v.Verify(ctx, mustSign(t, mustKey(t), "ann", []string{"analyst"}, time.Now(), time.Minute))
		if err == nil {
			t.Fatal("Verify(unknown key) = nil, want an error")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Verify(unknown key) took %s with a 200 ms context, want it to give up with its context", d)
		}
	})
	if n := maxInFlight.Load(); n != 1 {
		t.Fatalf("at most %d JWK set fetches at once, want 1 (one refresh at a time)", n)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("fetches = %d, want 2 (the first, then one refresh shared by every caller)", n)
	}
}

// TestRequire_UserAdmin: a User Administrator passes only the people
// management check; every other role's check refuses them.
func TestRequire_UserAdmin(t *testing.T) {
	cur := mustKey(t)
	privs := []ed25519.PrivateKey{cur}
	var fetches atomic.Int32
	srv := jwksServer(t, &privs, &fetches)
	auth := authz.New(authz.NewVerifier(authz.NewJWKS(srv.URL, time.Minute, nil)), "the-admin-key", nil)
	tok := mustSign(t, cur, "uma", []string{authz.RoleUserAdmin}, time.Now(), time.Minute)
	tests := []struct {
		name  string
		roles []string
		want  int
	}{
		{"People", []string{authz.RoleUserAdmin}, 204},
		{"Analyst", []string{authz.RoleAnalyst}, 403},
		{"Auditor", []string{authz.RoleAuditor, authz.RoleAdmin}, 403},
		{"Admin", []string{authz.RoleAdmin}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := auth.Require(tt.roles...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNoContent)
			}))
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("Require(%v) with user_admin = %d, want %d", tt.roles, rec.Code, tt.want)
			}
		})
	}
}
