package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"threatview/platform/httpserver"
	"threatview/visualrenderer/httpapi"
)

// TestSignIn_ForwardsBrowserAddr: identity throttles failed sign-ins by
// the address the renderer names with its forwarder key. Behind an ingress
// in RENDERER_TRUSTED_PROXIES that is the browser's address from
// X-Forwarded-For (not the ingress's, which would throttle everyone at
// once); from any other peer a client's own X-Forwarded-For is ignored, so
// a guesser cannot pick a fresh address per try.
func TestSignIn_ForwardsBrowserAddr(t *testing.T) {
	const fwdKey = "forwarder-key-of-at-least-32-characters"
	var mu sync.Mutex
	var gotXFF, gotKey string
	var logins int
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/login" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		logins++
		gotXFF, gotKey = strings.Join(r.Header.Values("X-Forwarded-For"), "|"), r.Header.Get("X-Forwarder-Key")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"wrong username or password"}}`))
	}))
	defer idp.Close()
	log := slog.New(slog.DiscardHandler)
	auth := httpapi.NewIdentityAuth(idp.URL, fwdKey, "", false, log).
		TrustProxies([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")})
	h := httpapi.New(nil, auth, httpserver.NewRegistry(), nil, log)

	csrf := strings.Repeat("c", 43)
	for _, tc := range []struct {
		name, peer, xff, want string
	}{
		{"TrustedIngress", "10.1.2.3:40000", "203.0.113.7", "203.0.113.7"},
		{"TrustedIngressClientHop", "10.1.2.3:40000", "198.18.0.1, 203.0.113.7", "203.0.113.7"},
		{"TrustedChain", "[fd00::5]:40000", "203.0.113.8, 10.9.9.9", "203.0.113.8"},
		{"UntrustedSpoof", "198.51.100.9:40000", "203.0.113.66", "198.51.100.9"},
		{"TrustedNoHeader", "10.1.2.3:40000", "", "10.1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			before := logins
			mu.Unlock()
			form := url.Values{"csrf": {csrf}, "username": {"someone"}, "password": {"wrong"}}
			r := httptest.NewRequest(http.MethodPost, "/signin", strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.AddCookie(&http.Cookie{Name: "tv_csrf", Value: csrf})
			r.RemoteAddr = tc.peer
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("POST /signin = %d, want 401 (identity refused)", rec.Code)
			}
			mu.Lock()
			defer mu.Unlock()
			if logins != before+1 {
				t.Fatalf("identity saw %d logins, want 1", logins-before)
			}
			if gotXFF != tc.want || gotKey != fwdKey {
				t.Errorf("identity got X-Forwarded-For %q, X-Forwarder-Key %q; want %q with the forwarder key", gotXFF, gotKey, tc.want)
			}
		})
	}
}
