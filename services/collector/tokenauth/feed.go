package tokenauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"threatview/platform/mq"
	"threatview/platform/wire"
)

// Feed is a subscription to the revocations topic (an *mq.Subscriber).
type Feed interface {
	// C delivers the announcements; it is closed when the feed ends.
	C() <-chan *mq.Delivery
	// Ready returns nil while the subscription is connected.
	Ready(ctx context.Context) error
}

// Timing of the feed's connection tracking.
const (
	// feedPoll is how often Follow looks at the subscription's state. The
	// subscriber waits at least 100 ms before it reconnects, so a break is
	// seen.
	feedPoll = 25 * time.Millisecond
	// feedGrace covers the time between the subscription reporting itself
	// connected and the broker routing the topic's messages to it
	// (SUBSCRIBE has no receipt).
	feedGrace = time.Second
	// revokedTTL is how long an announced revocation stays in the cache (it
	// is never undone; eviction may drop it sooner, and then the tokens
	// service is asked again).
	revokedTTL = 24 * time.Hour
)

// feedState says since when every revocation is known to the cache.
type feedState struct {
	mu   sync.Mutex
	up   bool
	from time.Time // valid while up: revocations announced after it were all received
}

// covers reports whether a token confirmed active at t would have had any
// later revocation applied.
func (f *feedState) covers(t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up && !t.Before(f.from)
}

// Follow applies the revocations announced on f until ctx ends or f's
// channel closes, and tracks f's connection: stale entries are served
// during a tokens outage only while f has been connected since before they
// were confirmed (see the package comment). Call it once, in its own
// goroutine.
func (c *Client) Follow(ctx context.Context, f Feed) {
	tick := time.NewTicker(feedPoll)
	defer tick.Stop()
	defer c.setFeed(false)
	c.pollFeed(ctx, f)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.pollFeed(ctx, f)
		case d, ok := <-f.C():
			if !ok {
				return
			}
			c.applyAnnouncement(d.Body)
			_ = d.Ack() // a lost ack only means the message comes again
		}
	}
}

func (c *Client) pollFeed(ctx context.Context, f Feed) {
	c.setFeed(f.Ready(ctx) == nil)
}

func (c *Client) setFeed(up bool) {
	c.feed.mu.Lock()
	defer c.feed.mu.Unlock()
	switch {
	case up && !c.feed.up:
		c.feed.up = true
		c.feed.from = time.Now().Add(feedGrace)
	case !up && c.feed.up:
		c.feed.up = false
		c.feedBrks.Add(1)
	}
}

// FeedUp reports whether the revocation feed is connected (for a metric).
func (c *Client) FeedUp() bool {
	c.feed.mu.Lock()
	defer c.feed.mu.Unlock()
	return c.feed.up
}

func (c *Client) applyAnnouncement(body []byte) {
	var rev wire.Revocation
	if err := json.Unmarshal(body, &rev); err != nil {
		return
	}
	var key [sha256.Size]byte
	if n, err := hex.Decode(key[:], []byte(rev.TokenSHA256)); err != nil || n != sha256.Size {
		return
	}
	c.Revoke(key)
}

// Revoke marks the token whose SHA-256 is key as revoked: checks refuse it
// from the cache, whatever the tokens service answers or fails to.
func (c *Client) Revoke(key [sha256.Size]byte) {
	now := time.Now()
	c.revs.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if len(c.entries) >= c.cfg.MaxEntries {
		c.evictLocked(now)
	}
	c.entries[key] = entry{id: e.id, revoked: true, expires: now.Add(revokedTTL)}
}
