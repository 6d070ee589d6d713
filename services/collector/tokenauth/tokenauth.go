// Package tokenauth checks app tokens for the collector against the tokens
// service (POST /v1/introspect with the internal key) and caches the
// answers, so that in the steady state a check costs no network hop.
//
// Cache rules:
//   - Entries are keyed by the SHA-256 of the token; plain tokens are never
//     kept.
//   - An active token is cached for PositiveTTL (30 s by default): with the
//     tokens service up, a revocation takes effect within that time. An
//     unknown or revoked token is cached for NegativeTTL (5 s), so a newly
//     created token works soon and garbage costs at most one lookup per
//     token per NegativeTTL.
//   - At most one lookup per token is in flight (single flight); concurrent
//     checks of the same token wait for it.
//   - Revocations also arrive at once over the broker (Follow): the tokens
//     service announces each one on a topic before its DELETE answers, and
//     the token is then refused from the cache for as long as it stays
//     there, whatever the tokens service's state.
//   - When the tokens service cannot answer (down, timeout, 5xx), an active
//     token keeps working for up to MaxStale (5 min by default) past its
//     PositiveTTL, but only if the revocation feed has been connected without
//     a break since before the token was last confirmed: then any revocation
//     since that confirmation has reached this cache. After a break in the
//     feed (broker restart, network) the announcements made meanwhile are
//     lost (a topic keeps nothing for a subscriber that is away), so entries
//     confirmed before the feed came back are not served stale; they are
//     re-confirmed by their normal refresh within PositiveTTL. Without a feed
//     nothing is served stale. A stale entry is served for NegativeTTL before
//     the service is asked again. Any other token gets ErrUnavailable (the
//     collector answers 503, not 401). After a failed lookup, lookups fail
//     fast for one second so requests do not each wait Timeout for a
//     hanging service.
//   - Lookups of tokens the cache does not know as active are capped
//     (golang.org/x/time/rate): at most UnknownRate a second (burst
//     UnknownBurst) in all, ClientRate a second (burst ClientBurst) per
//     client address (per /64 for IPv6, the address given with WithClient),
//     and UnknownInFlight at once. A check over a cap gets a *LimitedError
//     (ErrLookupLimited) at once, saying when to retry: the collector
//     answers 429 (rate) or 503 (in flight) with Retry-After, never 401,
//     since nothing is known about a token that was not looked up. So a
//     flood of random well-formed tokens costs a bounded number of lookups
//     and never waits on the tokens service; active tokens in the cache,
//     including their refreshes, are never capped.
//   - The negative cache: an unknown or revoked token is remembered as
//     such for NegativeTTL, so a token that keeps being replayed (an old
//     app build, a script) costs one lookup per NegativeTTL. A token that
//     was never issued cannot become valid later: tokens are 32 random
//     bytes, shown only after their creation is committed, so no check can
//     have seen a token before it existed and a new token is never hidden
//     by a negative entry. Negative entries share the MaxEntries bound
//     and are evicted first; the lookup caps keep them to about
//     UnknownRate x NegativeTTL + UnknownBurst at a time (350 with the
//     defaults). Entries() counts them (collector_token_cache_entries).
//   - A cold cache is filled in bulk: Warm fetches the active tokens most
//     recently used or created (GET /v1/introspect/active, at most
//     WarmLimit) in one request, so a restarted or new collector knows the
//     tokens of the apps that are about to arrive without one lookup each.
//     While the warm-up runs (at most 5 x Timeout), checks of tokens not in
//     the cache wait for it (at most Timeout) instead of each starting a
//     lookup.
//   - A string that does not have the shape of a token is refused with
//     ErrUnauthorized without a lookup.
package tokenauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Errors returned by Check.
var (
	// ErrUnauthorized means the token is malformed, unknown or revoked.
	ErrUnauthorized = errors.New("token is not valid")
	// ErrUnavailable means the tokens service could not be asked and the
	// token is not cached.
	ErrUnavailable = errors.New("tokens service unavailable")
	// ErrLookupLimited means a token unknown to the cache was not looked up
	// because a lookup cap was reached: the token may well be valid, so this
	// is "busy, retry", never "unauthorized". The error is a *LimitedError.
	ErrLookupLimited = errors.New("too many lookups of unknown tokens")
)

// Identity is who an active token speaks for.
type Identity struct {
	TokenID string
	AppID   string
}

// Config configures a Client. Zero durations take the defaults.
type Config struct {
	URL         string        // base URL of the tokens service
	InternalKey string        // bearer key for /v1/introspect
	PositiveTTL time.Duration // default 30s
	NegativeTTL time.Duration // default 5s
	Timeout     time.Duration // one lookup; default 2s
	MaxStale    time.Duration // how long past PositiveTTL an active token survives an outage (with a live feed); default 5m, negative: never
	MaxEntries  int           // cache size bound; default 100000

	UnknownRate     float64 // lookups/s of tokens not known as active, all clients; default 50
	UnknownBurst    int     // default 100
	ClientRate      float64 // the same per client address; default 5
	ClientBurst     int     // default 20
	UnknownInFlight int     // such lookups at once; default 16

	WarmLimit int // active tokens Warm loads at most; default MaxEntries/2
}

// Stats are the client's counters since it was made.
type Stats struct {
	Hits         uint64 // checks answered from a fresh cache entry
	Misses       uint64 // checks that needed a lookup (or waited for one)
	Lookups      uint64 // requests sent to the tokens service
	LookupErrors uint64 // lookups that failed (service down, timeout, bad answer)
	StaleServed  uint64 // failed lookups answered from an expired entry of an active token
	Limited      uint64 // checks of unknown tokens refused by a lookup cap
	Revocations  uint64 // revocations received from the feed
	FeedBreaks   uint64 // times the revocation feed was found disconnected
	Warmed       uint64 // active tokens loaded by Warm
}

// Client checks tokens. It is safe for concurrent use.
type Client struct {
	cfg        Config
	url        string
	http       *http.Client
	group      singleflight.Group
	mu         sync.RWMutex
	entries    map[[sha256.Size]byte]entry
	hits       atomic.Uint64
	misses     atomic.Uint64
	lookups    atomic.Uint64
	lookupErrs atomic.Uint64
	stale      atomic.Uint64
	downUntil  atomic.Int64 // unix ns; lookups fail fast before it

	limits   limits
	feed     feedState
	limited  atomic.Uint64
	revs     atomic.Uint64
	feedBrks atomic.Uint64

	warmed  atomic.Uint64
	warming atomic.Pointer[chan struct{}] // closed when a warm-up in progress ends; nil when none
}

type entry struct {
	id        Identity
	active    bool
	revoked   bool      // announced revoked: never active again
	expires   time.Time // fresh until
	keep      time.Time // usable during an outage until (active entries)
	confirmed time.Time // when the tokens service last said active
}

// New returns a Client. hc may be nil (a client with its own transport).
func New(cfg Config, hc *http.Client) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("tokenauth: URL is required")
	}
	if cfg.InternalKey == "" {
		return nil, errors.New("tokenauth: InternalKey is required")
	}
	if cfg.PositiveTTL <= 0 {
		cfg.PositiveTTL = 30 * time.Second
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.MaxStale == 0 {
		cfg.MaxStale = 5 * time.Minute
	}
	if cfg.MaxStale < 0 {
		cfg.MaxStale = 0
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 100_000
	}
	if cfg.UnknownRate <= 0 {
		cfg.UnknownRate = 50
	}
	if cfg.UnknownBurst <= 0 {
		cfg.UnknownBurst = 100
	}
	if cfg.ClientRate <= 0 {
		cfg.ClientRate = 5
	}
	if cfg.ClientBurst <= 0 {
		cfg.ClientBurst = 20
	}
	if cfg.UnknownInFlight <= 0 {
		cfg.UnknownInFlight = 16
	}
	if cfg.WarmLimit <= 0 || cfg.WarmLimit > cfg.MaxEntries/2 {
		// Half the cache: room stays for the tokens looked up afterwards.
		cfg.WarmLimit = cfg.MaxEntries / 2
	}
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}}
	}
	c := &Client{
		cfg:     cfg,
		url:     strings.TrimRight(cfg.URL, "/") + "/v1/introspect",
		http:    hc,
		entries: make(map[[sha256.Size]byte]entry),
	}
	c.limits.init(cfg)
	return c, nil
}

// Stats returns the counters; a collector exports them (hit ratio =
// Hits / (Hits + Misses)).
func (c *Client) Stats() Stats {
	return Stats{
		Hits:         c.hits.Load(),
		Misses:       c.misses.Load(),
		Lookups:      c.lookups.Load(),
		LookupErrors: c.lookupErrs.Load(),
		StaleServed:  c.stale.Load(),
		Limited:      c.limited.Load(),
		Revocations:  c.revs.Load(),
		FeedBreaks:   c.feedBrks.Load(),
		Warmed:       c.warmed.Load(),
	}
}

// Check returns the identity of an active token. Errors: ErrUnauthorized
// (malformed, unknown or revoked), a *LimitedError (ErrLookupLimited: a
// token not known as active, over a lookup cap; retry later), ErrUnavailable
// (the tokens service could not answer and the token is not cached), or
// ctx's error.
// The client address for the per-client cap comes from ctx (WithClient).
func (c *Client) Check(ctx context.Context, token string) (Identity, error) {
	if !wellFormed(token) {
		return Identity{}, ErrUnauthorized
	}
	// Hash a stack copy: []byte(token) would allocate (tokens are longer
	// than the compiler's 32-byte temporary buffer).
	var buf [tokenLen]byte
	copy(buf[:], token)
	key := sha256.Sum256(buf[:])
	now := time.Now()
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if ok && now.Before(e.expires) {
		c.hits.Add(1)
		return e.result()
	}
	if !ok {
		if w := c.warming.Load(); w != nil && c.waitWarm(ctx, *w) {
			// The warm-up may have brought it.
			c.mu.RLock()
			e, ok = c.entries[key]
			c.mu.RUnlock()
			if ok && now.Before(e.expires) {
				c.hits.Add(1)
				return e.result()
			}
		}
	}
	c.misses.Add(1)
	return c.miss(ctx, key, token, !ok || !e.active)
}

// miss waits for the one lookup of key in flight, starting it if need be;
// a token not known as active starts one only within the lookup caps
// (checks joining a flight cost nothing). It is apart from Check so the hot
// path allocates nothing.
func (c *Client) miss(ctx context.Context, key [sha256.Size]byte, token string, unknown bool) (Identity, error) {
	ch := c.group.DoChan(string(key[:]), func() (any, error) {
		if unknown {
			if err := c.limits.admit(ctx, time.Now()); err != nil {
				c.limited.Add(1)
				return entry{}, err
			}
			defer c.limits.done()
		}
		return c.lookup(key, token)
	})
	select {
	case <-ctx.Done():
		return Identity{}, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return Identity{}, res.Err
		}
		return res.Val.(entry).result()
	}
}

func (e entry) result() (Identity, error) {
	if !e.active {
		return Identity{}, ErrUnauthorized
	}
	return e.id, nil
}

// lookup asks the tokens service and caches its answer. It runs detached
// from any one caller's context so a caller that gives up does not fail
// the others waiting on the same flight.
func (c *Client) lookup(key [sha256.Size]byte, token string) (entry, error) {
	now := time.Now()
	started := now // an answer is no newer than the moment it was asked for
	var (
		id     Identity
		active bool
		err    error
	)
	if down := c.downUntil.Load(); down != 0 && now.UnixNano() < down {
		err = errors.New("tokens service failed a moment ago")
	} else {
		c.lookups.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		id, active, err = c.introspect(ctx, token)
		cancel()
		now = time.Now()
		if err != nil {
			c.lookupErrs.Add(1)
			// Fail fast for a short while instead of making every request
			// wait for a service that is down or hanging.
			c.downUntil.Store(now.Add(breakerPause).UnixNano())
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// An active token seen recently keeps working; it is served from the
		// cache for another NegativeTTL before the service is asked again.
		e, ok := c.entries[key]
		if ok && e.active && now.Before(e.keep) && c.feed.covers(e.confirmed) {
			e.expires = now.Add(c.cfg.NegativeTTL)
			if e.expires.After(e.keep) {
				e.expires = e.keep
			}
			c.entries[key] = e
			c.stale.Add(1)
			return e, nil
		}
		return entry{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if old, ok := c.entries[key]; ok && old.revoked {
		// The revocation was announced while this lookup was on its way:
		// its "active" is older news.
		return old, nil
	}
	e := entry{id: id, active: active}
	if active {
		e.expires = now.Add(c.cfg.PositiveTTL)
		e.keep = e.expires.Add(c.cfg.MaxStale)
		e.confirmed = started
	} else {
		e.expires = now.Add(c.cfg.NegativeTTL)
	}
	if len(c.entries) >= c.cfg.MaxEntries {
		c.evictLocked(now)
	}
	c.entries[key] = e
	return e, nil
}

// breakerPause is how long lookups fail fast after one failed.
const breakerPause = time.Second

// evictLocked drops entries that are no longer usable, then unknown tokens;
// if the cache is still nearly full it drops an arbitrary half (map order),
// so a flood of random tokens cannot grow memory without bound.
func (c *Client) evictLocked(now time.Time) {
	for k, e := range c.entries {
		if now.After(e.expires) && (!e.active || now.After(e.keep)) {
			delete(c.entries, k)
		}
	}
	if len(c.entries) < c.cfg.MaxEntries {
		return
	}
	// Unknown tokens go before active ones: a flood of garbage must not
	// push good tokens out.
	for k, e := range c.entries {
		if !e.active && !e.revoked {
			delete(c.entries, k)
		}
	}
	if len(c.entries) < c.cfg.MaxEntries*3/4 {
		return
	}
	n := len(c.entries) / 2
	for k := range c.entries {
		if n == 0 {
			break
		}
		delete(c.entries, k)
		n--
	}
}

type introspectResponse struct {
	Active  bool   `json:"active"`
	TokenID string `json:"token_id"`
	AppID   string `json:"app_id"`
}

func (c *Client) introspect(ctx context.Context, token string) (Identity, bool, error) {
	body, err := json.Marshal(struct {
		Token string `json:"token"`
	}{token})
	if err != nil {
		return Identity{}, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return Identity{}, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.cfg.InternalKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return Identity{}, false, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Identity{}, false, fmt.Errorf("read introspection answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		// 401 here means the collector's INTERNAL_KEY is wrong: a
		// configuration fault, not the app's, so it is "unavailable".
		return Identity{}, false, fmt.Errorf("introspection answered %d", resp.StatusCode)
	}
	var ir introspectResponse
	if err := json.Unmarshal(raw, &ir); err != nil {
		return Identity{}, false, fmt.Errorf("decode introspection answer: %w", err)
	}
	if !ir.Active {
		return Identity{}, false, nil
	}
	if ir.TokenID == "" || ir.AppID == "" {
		return Identity{}, false, errors.New("introspection answer lacks token_id or app_id")
	}
	return Identity{TokenID: ir.TokenID, AppID: ir.AppID}, true, nil
}

// Token shape, as issued by the tokens service: "tvk_" and 43 base64url
// characters (32 random bytes).
const (
	tokenPrefix = "tvk_"
	tokenLen    = len(tokenPrefix) + 43
)

func wellFormed(s string) bool {
	if len(s) != tokenLen || s[:len(tokenPrefix)] != tokenPrefix {
		return false
	}
	for i := len(tokenPrefix); i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
