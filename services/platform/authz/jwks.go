package authz

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// JWK is one public key as the identity service publishes it (RFC 8037:
// kty OKP, crv Ed25519).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// JWKSet is the body of /.well-known/jwks.json.
type JWKSet struct {
	Keys []JWK `json:"keys"`
}

// KeyID is the kid of an Ed25519 public key: the first 16 bytes of its
// SHA-256 in base64url, so every replica names a key the same way.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// PublicJWK returns the JWK of pub.
func PublicJWK(pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: KeyID(pub), Alg: "EdDSA", Use: "sig"}
}

// parseSet returns the Ed25519 keys of a JWK set by kid, skipping keys of
// other types.
func parseSet(body []byte) (map[string]ed25519.PublicKey, error) {
	var set JWKSet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("decode JWK set: %w", err)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Kid == "" {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		keys[k.Kid] = ed25519.PublicKey(x)
	}
	return keys, nil
}

// JWKS is a KeySource that fetches the identity service's JWK set and caches
// it. The set is fetched again when it is older than the refresh interval,
// and when a token names an unknown kid (key rotation), at most once per
// MinRefetch so tokens with made-up kids cannot flood the identity service.
// When a refresh fails the cached keys stay in use.
//
// A slow or hanging identity service must not stall the callers: one
// refresh runs at a time (every caller that needs it shares it), the lock is
// never held while fetching, a token signed with a known key is verified at
// once even when the set is due for a refresh (the refresh runs in the
// background), and a caller waiting for an unknown kid gives up with its
// own context.
type JWKS struct {
	url     string
	client  *http.Client
	refresh time.Duration
	// MinRefetch is the least time between two fetches.
	MinRefetch time.Duration

	mu        sync.Mutex
	keys      map[string]ed25519.PublicKey
	fetchedAt time.Time // last successful fetch
	triedAt   time.Time // last attempt
	pending   *flight   // the refresh under way, if any
}

// flight is one refresh of the set; done is closed when it has finished
// and err is its outcome.
type flight struct {
	done chan struct{}
	err  error
}

// NewJWKS returns a JWKS for the set at url, refreshed every refresh
// (default 5 minutes). hc may be nil.
func NewJWKS(url string, refresh time.Duration, hc *http.Client) *JWKS {
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	if refresh <= 0 {
		refresh = 5 * time.Minute
	}
	return &JWKS{url: url, client: hc, refresh: refresh, MinRefetch: 5 * time.Second}
}

// Key returns the key with kid, fetching the set when needed.
func (j *JWKS) Key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	j.mu.Lock()
	now := time.Now()
	k, ok := j.keys[kid]
	stale := now.Sub(j.fetchedAt) > j.refresh
	if ok && !stale {
		j.mu.Unlock()
		return k, nil
	}
	f := j.pending
	if f == nil && (j.triedAt.IsZero() || now.Sub(j.triedAt) >= j.MinRefetch) {
		f = j.startLocked(now)
	}
	haveKeys := j.keys != nil
	j.mu.Unlock()
	if ok {
		return k, nil // known keys keep working while the refresh runs
	}
	if f == nil {
		// Fetched (or failed to) a moment ago: do not ask again yet, so
		// neither made-up kids nor an unreachable identity service make
		// every request wait for a fetch.
		if !haveKeys {
			return nil, fmt.Errorf("%w: the last fetch failed", ErrKeysUnavailable)
		}
		return nil, fmt.Errorf("%w: unknown key id", ErrInvalidToken)
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for the JWK set: %v", ErrKeysUnavailable, ctx.Err())
	}
	j.mu.Lock()
	k, ok = j.keys[kid]
	haveKeys = j.keys != nil
	j.mu.Unlock()
	switch {
	case ok:
		return k, nil
	case !haveKeys:
		return nil, fmt.Errorf("%w: %v", ErrKeysUnavailable, f.err)
	case f.err != nil:
		return nil, fmt.Errorf("%w: unknown key id (refresh failed: %v)", ErrInvalidToken, f.err)
	}
	return nil, fmt.Errorf("%w: unknown key id", ErrInvalidToken)
}

// startLocked starts the one refresh; j.mu must be held. The fetch has its
// own timeout and no caller's context: callers share it and may leave.
func (j *JWKS) startLocked(now time.Time) *flight {
	f := &flight{done: make(chan struct{})}
	j.pending, j.triedAt = f, now
	go func() {
		keys, err := j.fetch(context.Background())
		j.mu.Lock()
		if err == nil {
			j.keys, j.fetchedAt = keys, time.Now()
		}
		f.err = err
		j.pending = nil
		j.mu.Unlock()
		close(f.done)
	}()
	return f
}

func (j *JWKS) fetch(ctx context.Context) (map[string]ed25519.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get JWK set: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read JWK set: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get JWK set: status %d", resp.StatusCode)
	}
	return parseSet(body)
}

// StaticKeys is a KeySource over a fixed set of keys (the identity service
// verifies its own tokens with it; tests use it too).
type StaticKeys map[string]ed25519.PublicKey

// Key returns the key with kid.
func (s StaticKeys) Key(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if k, ok := s[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("%w: unknown key id", ErrInvalidToken)
}
