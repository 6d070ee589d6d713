package httpserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// BearerToken returns the token of an "Authorization: Bearer <token>" header,
// or "" when the header is missing or of another scheme.
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return ""
	}
	return strings.TrimSpace(h[7:])
}

// KeyEqual compares a presented key with the expected one in constant time.
// Both are hashed first so neither length leaks through timing.
func KeyEqual(presented, expected string) bool {
	if expected == "" {
		return false
	}
	a := sha256.Sum256([]byte(presented))
	b := sha256.Sum256([]byte(expected))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// RequireKey returns middleware that lets a request through only with
// "Authorization: Bearer <key>"; anything else gets 401 with the JSON error.
func RequireKey(key string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !KeyEqual(BearerToken(r), key) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="threatview"`)
				WriteError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid credentials", nil)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
