package tokenauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxWarmBody bounds the warm-up answer read (about 200 bytes a token).
const maxWarmBody = 64 << 20

type warmResponse struct {
	Tokens []struct {
		TokenSHA256 string `json:"token_sha256"`
		TokenID     string `json:"token_id"`
		AppID       string `json:"app_id"`
	} `json:"tokens"`
}

// Warm loads the active tokens the tokens service lists as most recently
// used or created (at most Config.WarmLimit, in one request) into the
// cache, and returns how many it added; it waits at most 5 x
// Config.Timeout for the answer. Tokens already cached (a
// revocation announced meanwhile, say) are left alone. While it runs,
// checks of tokens not in the cache wait for it (at most Config.Timeout)
// instead of each starting a lookup. Call it once at start; on error the
// cache fills token by token as before.
func (c *Client) Warm(ctx context.Context) (int, error) {
	done := make(chan struct{})
	c.warming.Store(&done)
	defer func() {
		c.warming.Store(nil)
		close(done)
	}()
	started := time.Now()
	// One answer of up to WarmLimit tokens (about 7 MB for 50,000): more
	// time than one lookup.
	ctx, cancel := context.WithTimeout(ctx, 5*c.cfg.Timeout)
	defer cancel()
	u := strings.TrimSuffix(c.url, "/v1/introspect") + "/v1/introspect/active?limit=" + strconv.Itoa(c.cfg.WarmLimit)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.InternalKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("warm token cache: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("warm token cache: tokens service answered %d", resp.StatusCode)
	}
	var wr warmResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxWarmBody)).Decode(&wr); err != nil {
		return 0, fmt.Errorf("warm token cache: decode answer: %w", err)
	}
	now := time.Now()
	n := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range wr.Tokens {
		var key [sha256.Size]byte
		if k, err := hex.Decode(key[:], []byte(t.TokenSHA256)); err != nil || k != sha256.Size || t.TokenID == "" || t.AppID == "" {
			return n, errors.New("warm token cache: an entry lacks token_sha256, token_id or app_id")
		}
		if _, ok := c.entries[key]; ok || len(c.entries) >= c.cfg.MaxEntries {
			continue
		}
		// Expiries are spread over the second half of PositiveTTL so that
		// the warmed tokens are not all looked up again in the same moment.
		ttl := c.cfg.PositiveTTL/2 + rand.N(c.cfg.PositiveTTL/2+1)
		e := entry{id: Identity{TokenID: t.TokenID, AppID: t.AppID}, active: true, expires: now.Add(ttl), confirmed: started}
		e.keep = e.expires.Add(c.cfg.MaxStale)
		c.entries[key] = e
		n++
	}
	c.warmed.Add(uint64(n))
	return n, nil
}

// waitWarm waits for the warm-up in progress (done closes when it ends),
// at most Config.Timeout; it reports whether the warm-up ended.
func (c *Client) waitWarm(ctx context.Context, done chan struct{}) bool {
	t := time.NewTimer(c.cfg.Timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// Entries returns how many active tokens and how many negative entries
// (unknown or revoked tokens) the cache holds (for a metric); together at
// most Config.MaxEntries.
func (c *Client) Entries() (active, negative int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.entries {
		if e.active {
			active++
		} else {
			negative++
		}
	}
	return active, negative
}
