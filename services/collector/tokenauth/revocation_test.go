package tokenauth_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"threatview/collector/tokenauth"
	"threatview/platform/mq"
	"threatview/platform/testenv"
)

// TestCheck_RevokedThroughOutage: the tokens service dies right after a
// revocation; the revoked token is refused while a good one keeps working.
func TestCheck_RevokedThroughOutage(t *testing.T) {
	s := startTokens(t)
	revokedID, revoked := s.create(t, "demo-app")
	goodID, good := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: 300 * time.Millisecond, Timeout: time.Second})
	follow(t, c, s)
	ctx := context.Background()
	for _, tok := range []string{revoked, good} {
		if _, err := c.Check(ctx, tok); err != nil {
			t.Fatalf("Check() before the revocation = %v", err)
		}
	}
	s.admin(t, http.MethodDelete, "/v1/tokens/"+revokedID, "")
	s.stop()
	time.Sleep(400 * time.Millisecond) // past PositiveTTL: only stale entries are left
	for i := 0; i < 3; i++ {
		if got, err := c.Check(ctx, revoked); !errors.Is(err, tokenauth.ErrUnauthorized) {
			t.Fatalf("Check(revoked) with the tokens service dead = %+v, %v, want ErrUnauthorized", got, err)
		}
		if got, err := c.Check(ctx, good); err != nil || got.TokenID != goodID {
			t.Fatalf("Check(good) with the tokens service dead = %+v, %v, want %s", got, err, goodID)
		}
	}
}

func randomToken(t testing.TB) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "tvk_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// TestCheck_UnknownFlood: a flood of random well-formed tokens costs a
// bounded number of introspections, is refused fast, and does not slow a
// good token.
func TestCheck_UnknownFlood(t *testing.T) {
	s := startTokens(t)
	goodID, good := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: 200 * time.Millisecond, MaxEntries: 500})
	ctx := context.Background()
	if _, err := c.Check(ctx, good); err != nil {
		t.Fatal(err)
	}
	base := s.lookups.Load()

	const flood = 2 * time.Second
	stop := time.Now().Add(flood)
	var floodChecks, floodNon401 atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				_, err := c.Check(ctx, randomToken(t))
				floodChecks.Add(1)
				// Looked up: unknown. Over a cap: not looked up, retry.
				if !errors.Is(err, tokenauth.ErrUnauthorized) && !errors.Is(err, tokenauth.ErrLookupLimited) {
					floodNon401.Add(1)
				}
			}
		}()
	}
	var lat []time.Duration
	for time.Now().Before(stop) {
		t0 := time.Now()
		got, err := c.Check(ctx, good)
		lat = append(lat, time.Since(t0))
		if err != nil || got.TokenID != goodID {
			t.Errorf("Check(good) during the flood = %+v, %v", got, err)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p99 := lat[len(lat)*99/100]
	lookups := s.lookups.Load() - base
	t.Logf("flood: %d checks, %d introspections; good token: %d checks, p50 %s, p99 %s, max %s",
		floodChecks.Load(), lookups, len(lat), lat[len(lat)/2], p99, lat[len(lat)-1])
	if n := floodNon401.Load(); n != 0 {
		t.Errorf("%d flood checks were neither ErrUnauthorized nor ErrLookupLimited", n)
	}
	// Default global cap: 50 lookups/s with a burst of 100, plus the good
	// token's refreshes (one per PositiveTTL).
	if max := int64(100 + 50*flood.Seconds()*1.5 + 20); lookups > max {
		t.Errorf("introspections during a %s flood = %d, want at most %d", flood, lookups, max)
	}
	// The flood's 8 goroutines spin on 2 shared cores under -race: the
	// bound is about CPU, not about waiting on lookups.
	if p99 > 250*time.Millisecond {
		t.Errorf("good-token p99 during the flood = %s, want under 250ms", p99)
	}
}

// TestCheck_PerClientCap: one address over its cap is refused at once
// without a lookup, while another address's new token is still looked up.
func TestCheck_PerClientCap(t *testing.T) {
	s := startTokens(t)
	id, fresh := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{ClientRate: 1, ClientBurst: 5})
	attacker := tokenauth.WithClient(context.Background(), netip.MustParseAddr("2001:db8::1"))
	neighbour := tokenauth.WithClient(context.Background(), netip.MustParseAddr("2001:db8::ffff")) // same /64
	other := tokenauth.WithClient(context.Background(), netip.MustParseAddr("192.0.2.7"))
	base := s.lookups.Load()
	for i := 0; i < 50; i++ {
		_, err := c.Check(attacker, randomToken(t))
		want := tokenauth.ErrUnauthorized // looked up: unknown
		if i >= 5 {
			want = tokenauth.ErrLookupLimited // over the burst: not looked up
		}
		if !errors.Is(err, want) {
			t.Fatalf("Check(random) #%d = %v, want %v", i, err, want)
		}
	}
	if n := s.lookups.Load() - base; n > 6 {
		t.Errorf("introspections for 50 random tokens from one address = %d, want at most 6", n)
	}
	if _, err := c.Check(neighbour, fresh); !errors.Is(err, tokenauth.ErrLookupLimited) {
		t.Errorf("Check(fresh) from the same /64 = %v, want ErrLookupLimited", err)
	}
	if got, err := c.Check(other, fresh); err != nil || got.TokenID != id {
		t.Errorf("Check(fresh) from another address = %+v, %v, want %s", got, err, id)
	}
	if st := c.Stats(); st.Limited < 40 {
		t.Errorf("stats = %+v, want the refused lookups counted", st)
	}
}

// follow connects c to s's revocation topic and waits until the feed
// covers confirmations from now on.
func follow(t *testing.T, c *tokenauth.Client, s *tokensService) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub := mq.Subscribe(ctx, testenv.MustBroker(t), s.topic, 100, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan struct{})
	go func() { defer close(done); c.Follow(ctx, sub) }()
	t.Cleanup(func() { cancel(); <-done; <-sub.Done() })
	testenv.MustPing(t, 10*time.Second, "revocation feed", func() error {
		if !c.FeedUp() {
			return fmt.Errorf("feed down")
		}
		return nil
	})
	time.Sleep(1100 * time.Millisecond) // the feed's grace after subscribing
}

// fakeFeed is a revocation feed whose connection the test switches.
type fakeFeed struct {
	up atomic.Bool
	c  chan *mq.Delivery
}

func (f *fakeFeed) C() <-chan *mq.Delivery { return f.c }

func (f *fakeFeed) Ready(context.Context) error {
	if !f.up.Load() {
		return errors.New("down")
	}
	return nil
}

// TestCheck_FeedBreakEndsStaleGrace: announcements made while the feed was
// away are lost, so a token confirmed before a break is not served stale
// after it; one confirmed after the feed came back is.
func TestCheck_FeedBreakEndsStaleGrace(t *testing.T) {
	s := startTokens(t)
	_, before := s.create(t, "demo-app")
	afterID, after := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: 300 * time.Millisecond, Timeout: time.Second})
	f := &fakeFeed{c: make(chan *mq.Delivery)}
	f.up.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Follow(ctx, f) }()
	defer func() { cancel(); <-done }()
	waitFeed := func(want bool) {
		t.Helper()
		testenv.MustPing(t, 5*time.Second, "feed state", func() error {
			if c.FeedUp() != want {
				return fmt.Errorf("FeedUp() = %v, want %v", !want, want)
			}
			return nil
		})
	}
	waitFeed(true)
	time.Sleep(1100 * time.Millisecond) // the feed's grace
	if _, err := c.Check(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	// A break, then the feed is back.
	f.up.Store(false)
	waitFeed(false)
	f.up.Store(true)
	waitFeed(true)
	time.Sleep(1100 * time.Millisecond)
	if _, err := c.Check(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	s.stop()
	time.Sleep(400 * time.Millisecond) // both entries past PositiveTTL
	if _, err := c.Check(context.Background(), before); !errors.Is(err, tokenauth.ErrUnavailable) {
		t.Errorf("Check(confirmed before the break) = %v, want ErrUnavailable", err)
	}
	if got, err := c.Check(context.Background(), after); err != nil || got.TokenID != afterID {
		t.Errorf("Check(confirmed after the break) = %+v, %v, want served stale", got, err)
	}
	if st := c.Stats(); st.FeedBreaks != 1 {
		t.Errorf("FeedBreaks = %d, want 1", st.FeedBreaks)
	}
}
