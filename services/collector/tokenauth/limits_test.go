package tokenauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"threatview/collector/tokenauth"
)

// TestCheck_LimitedIsNotUnauthorized: a valid token that meets a lookup cap
// is told to retry (ErrLookupLimited with a Retry-After), never that it is
// unauthorized, and gets in once it retries after that wait.
func TestCheck_LimitedIsNotUnauthorized(t *testing.T) {
	s := startTokens(t)
	id, fresh := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{UnknownRate: 1, UnknownBurst: 1})
	ctx := tokenauth.WithClient(context.Background(), netip.MustParseAddr("192.0.2.9"))
	if _, err := c.Check(ctx, randomToken(t)); !errors.Is(err, tokenauth.ErrUnauthorized) {
		t.Fatalf("Check(random) = %v, want ErrUnauthorized", err)
	}
	_, err := c.Check(ctx, fresh)
	var le *tokenauth.LimitedError
	switch {
	case errors.Is(err, tokenauth.ErrUnauthorized):
		t.Fatalf("Check(valid) over the lookup cap = %v: a busy collector must not call a valid token unauthorized", err)
	case !errors.As(err, &le) || !errors.Is(err, tokenauth.ErrLookupLimited):
		t.Fatalf("Check(valid) over the lookup cap = %v, want a *LimitedError", err)
	case le.RetryAfter() < time.Second || le.RetryAfter() > 2*time.Second:
		t.Fatalf("RetryAfter() = %s, want 1s-2s at 1 lookup/s", le.RetryAfter())
	}
	time.Sleep(le.RetryAfter())
	if got, err := c.Check(ctx, fresh); err != nil || got.TokenID != id {
		t.Fatalf("Check(valid) after Retry-After = %+v, %v, want %s", got, err, id)
	}
}

// TestCheck_InFlightCap: with the tokens service slow, checks of unknown
// tokens beyond UnknownInFlight are refused at once as limited (a 503 with
// Retry-After at the collector), not as unauthorized.
func TestCheck_InFlightCap(t *testing.T) {
	s := startTokens(t)
	_, fresh := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{UnknownInFlight: 2, Timeout: 5 * time.Second})
	gate := make(chan struct{})
	s.gateMu.Lock()
	s.gate = gate
	s.gateMu.Unlock()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = c.Check(context.Background(), randomToken(t)) }()
	}
	waitFor(t, func() bool { return s.lookups.Load() == 2 })
	_, err := c.Check(context.Background(), fresh)
	var le *tokenauth.LimitedError
	if !errors.As(err, &le) || !le.InFlight || errors.Is(err, tokenauth.ErrUnauthorized) {
		t.Errorf("Check(valid) with 2 lookups in flight = %v, want an in-flight *LimitedError", err)
	}
	close(gate)
	wg.Wait()
}

// TestCheck_NegativeCache: a token found unknown is remembered as unknown
// for NegativeTTL: repeating it costs no lookup, and Entries counts it.
func TestCheck_NegativeCache(t *testing.T) {
	s := startTokens(t)
	c := newClient(t, s, tokenauth.Config{NegativeTTL: time.Minute})
	bad := randomToken(t)
	base := s.lookups.Load()
	for i := range 1000 {
		if _, err := c.Check(context.Background(), bad); !errors.Is(err, tokenauth.ErrUnauthorized) {
			t.Fatalf("Check(unknown) #%d = %v, want ErrUnauthorized", i, err)
		}
	}
	if n := s.lookups.Load() - base; n != 1 {
		t.Errorf("introspections for 1000 checks of one unknown token = %d, want 1", n)
	}
	if active, negative := c.Entries(); active != 0 || negative != 1 {
		t.Errorf("Entries() = %d, %d, want 0 active, 1 negative", active, negative)
	}
}

// TestWarm: a warmed cache answers the tokens the tokens service lists
// without one introspection each; a revoked token is not warmed; a check
// that arrives during the warm-up waits for it instead of looking up.
func TestWarm(t *testing.T) {
	s := startTokens(t)
	const n = 300
	ids := map[string]string{}
	for range n {
		id, tok := s.create(t, "warm-app")
		ids[tok] = id
	}
	revokedID, revoked := s.create(t, "warm-app")
	s.admin(t, http.MethodDelete, "/v1/tokens/"+revokedID, "")
	c := newClient(t, s, tokenauth.Config{})

	// Hold the warm-up until a check is waiting on it.
	gate := make(chan struct{})
	s.gateMu.Lock()
	s.gate = gate
	s.gateMu.Unlock()
	warmed := make(chan error, 1)
	go func() {
		got, err := c.Warm(context.Background())
		if err == nil && got < n {
			err = errors.New("too few")
		}
		warmed <- err
	}()
	waitFor(t, func() bool { return s.warms.Load() == 1 })
	var first string
	for tok := range ids {
		first = tok
		break
	}
	checked := make(chan error, 1)
	go func() {
		got, err := c.Check(context.Background(), first)
		if err == nil && got.TokenID != ids[first] {
			err = errors.New("wrong token id " + got.TokenID)
		}
		checked <- err
	}()
	time.Sleep(100 * time.Millisecond)
	close(gate)
	if err := <-warmed; err != nil {
		t.Fatalf("Warm() = %v", err)
	}
	if err := <-checked; err != nil {
		t.Fatalf("Check() during the warm-up = %v", err)
	}
	base := s.lookups.Load()
	for tok, id := range ids {
		if got, err := c.Check(context.Background(), tok); err != nil || got.TokenID != id {
			t.Fatalf("Check(warmed) = %+v, %v, want %s", got, err, id)
		}
	}
	if n := s.lookups.Load() - base; n != 0 {
		t.Errorf("introspections for %d warmed tokens = %d, want 0", len(ids), n)
	}
	if _, err := c.Check(context.Background(), revoked); !errors.Is(err, tokenauth.ErrUnauthorized) {
		t.Errorf("Check(revoked) after Warm = %v, want ErrUnauthorized", err)
	}
	if st := c.Stats(); st.Warmed < n {
		t.Errorf("Stats().Warmed = %d, want at least %d", st.Warmed, n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
