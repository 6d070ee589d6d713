package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"threatview/admininterface"
)

// TestIdentity_OIDCFinishErrorHasNoSecrets: the provider's code and state
// ride in the callback's query; when identity cannot be reached the error
// (which the UI logs) must not carry them.
func TestIdentity_OIDCFinishErrorHasNoSecrets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := Identity{Client: New("http://"+addr, nil, 2*time.Second)}
	q := url.Values{"code": {"secret-code-123"}, "state": {"secret-state-456"}}
	_, err = c.OIDCFinish(context.Background(), q, "secret-state-456")
	if !errors.Is(err, admininterface.ErrUnavailable) {
		t.Fatalf("OIDCFinish with identity down = %v, want ErrUnavailable", err)
	}
	if msg := err.Error(); strings.Contains(msg, "secret-code-123") || strings.Contains(msg, "secret-state-456") || strings.Contains(msg, "code=") {
		t.Fatalf("the error carries the callback's code or state: %s", msg)
	}
}

// TestIdentity_LoginThrottled: identity's 429 comes back as a *RetryError
// with its Retry-After, and the browser's address goes with the forwarder
// key only.
func TestIdentity_LoginThrottled(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Retry-After", "90")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"code":"throttled","message":"too many failed sign-ins"}}`))
	}))
	defer srv.Close()
	c := Identity{Client: New(srv.URL, nil, 2*time.Second), ForwarderKey: "fk"}
	_, err := c.Login(context.Background(), "ada", "pw", netip.MustParseAddr("198.51.100.7"))
	var re *RetryError
	if !errors.As(err, &re) || re.After != 90*time.Second || !errors.Is(err, admininterface.ErrInvalid) {
		t.Fatalf("Login throttled = %v, want a *RetryError of 90s wrapping ErrInvalid", err)
	}
	if got.Get("X-Forwarded-For") != "198.51.100.7" || got.Get("X-Forwarder-Key") != "fk" {
		t.Errorf("identity saw X-Forwarded-For %q, X-Forwarder-Key %q", got.Get("X-Forwarded-For"), got.Get("X-Forwarder-Key"))
	}
	c.ForwarderKey = ""
	_, _ = c.Login(context.Background(), "ada", "pw", netip.MustParseAddr("198.51.100.7"))
	if got.Get("X-Forwarded-For") != "" {
		t.Errorf("without a forwarder key the UI still named the address: %q", got.Get("X-Forwarded-For"))
	}
}
