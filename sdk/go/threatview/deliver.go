package threatview

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// maxRetryAfter caps a Retry-After the client honours.
const maxRetryAfter = 5 * time.Minute

// answer is the outcome of one request.
type answer struct {
	status     int
	retryAfter time.Duration
	requestID  string
	err        error // transport error
	code, msg  string
	index      int // the event the error names, -1 when none
}

// retryable reports whether the same request may be sent again: a
// transport error, 408, 429 or 5xx. The events carry their event_id, so a
// request that was in fact accepted is stored once however often it is
// sent.
func (a answer) retryable() bool {
	return a.err != nil || a.status == http.StatusRequestTimeout || a.status == http.StatusTooManyRequests || a.status >= 500
}

// String describes a failed attempt.
func (a answer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	if a.code != "" {
		return fmt.Sprintf("HTTP %d %s: %s", a.status, a.code, a.msg)
	}
	return a.msg
}

// deliver sends b until every event is delivered or dropped (true), or ctx
// ends first (false: b is unresolved).
func (c *Client) deliver(ctx context.Context, b *batch) bool {
	if b.items == nil && b.file != "" {
		items, bad, err := c.spool.load(b)
		if err != nil {
			// The file cannot be read at all: its events are lost, and
			// OnDrop hears of it.
			c.dropUnreadable(b.n, err)
			c.resolve(b)
			return true
		}
		for _, e := range bad {
			c.dropUnreadable(1, e)
		}
		c.mu.Lock()
		c.pending -= int64(b.n - len(items))
		b.n = len(items)
		c.mu.Unlock()
		b.items = items
	}
	var buf, zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	failures := 0
	for len(b.items) > 0 {
		buf.Reset()
		body(&buf, b.items, time.Now())
		zbuf.Reset()
		zw.Reset(&zbuf)
		_, _ = zw.Write(buf.Bytes())
		_ = zw.Close()

		a := c.post(ctx, zbuf.Bytes())
		switch {
		case a.err == nil && a.status == http.StatusAccepted:
			c.delivered.Add(uint64(len(b.items)))
			c.resolve(b)
			return true
		case a.retryable():
			if ctx.Err() != nil {
				return false
			}
			b.last = a
			c.lastErr.Store(a.String())
			failures++
			if c.cfg.MaxAttempts > 0 && failures >= c.cfg.MaxAttempts {
				c.dropItems(b.items, Drop{Reason: DropRetriesExhausted, Status: a.status, Code: a.code, Message: a.msg, RequestID: a.requestID, Err: a.err})
				c.resolve(b)
				return true
			}
			c.retries.Add(1)
			if !sleep(ctx, c.backoff(failures, a.retryAfter)) {
				return false
			}
		case a.index >= 0 && a.index < len(b.items) && len(b.items) > 1:
			// The collector named one bad event of the batch (a batch is
			// all or nothing): drop it and send the others at once.
			bad := b.items[a.index]
			c.dropItems([]item{bad}, Drop{Reason: DropRejected, Status: a.status, Code: a.code, Message: a.msg, RequestID: a.requestID})
			b.items = append(b.items[:a.index:a.index], b.items[a.index+1:]...)
			c.mu.Lock()
			b.n--
			c.pending--
			c.mu.Unlock()
			if c.spool != nil {
				if err := c.spool.rewrite(b); err != nil {
					// The file still holds the dropped event; a later
					// client would drop it again. Nothing is lost.
					_ = err
				}
			}
			failures = 0
		default:
			c.lastErr.Store(a.String())
			c.dropItems(b.items, Drop{Reason: DropRejected, Status: a.status, Code: a.code, Message: a.msg, RequestID: a.requestID, Err: a.err})
			c.resolve(b)
			return true
		}
	}
	c.resolve(b)
	return true
}

// post sends one gzipped body.
func (c *Client) post(ctx context.Context, gz []byte) answer {
	c.requests.Add(1)
	a := answer{index: -1}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.cfg.URL+"/v1/events", bytes.NewReader(gz))
	if err != nil {
		a.err = err
		return a
	}
	h := req.Header
	h.Set("Authorization", "Bearer "+c.cfg.Token)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Encoding", "gzip")
	h.Set("User-Agent", c.cfg.UserAgent)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	a.requestID = resp.Header.Get("X-Request-ID")
	a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if a.status == http.StatusTooManyRequests {
		c.throttled.Add(1)
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if a.status != http.StatusAccepted {
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Details struct {
					Index *int `json:"index"`
				} `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil {
			a.code, a.msg = eb.Error.Code, eb.Error.Message
			if eb.Error.Details.Index != nil {
				a.index = *eb.Error.Details.Index
			}
		}
		if a.code == "" {
			a.msg = fmt.Sprintf("HTTP %d: %.200s", a.status, data)
		}
	}
	return a
}

// backoff is the wait before attempt failures+1: exponential from
// MinBackoff, capped at MaxBackoff, with jitter ("equal jitter": between
// half and all of it), and never shorter than retryAfter (plus a little
// jitter, so clients told the same Retry-After do not return together).
func (c *Client) backoff(failures int, retryAfter time.Duration) time.Duration {
	d := c.cfg.MinBackoff
	for i := 1; i < failures && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	if d > c.cfg.MaxBackoff {
		d = c.cfg.MaxBackoff
	}
	d = d/2 + rand.N(d/2+1)
	if retryAfter > 0 {
		ra := retryAfter + rand.N(retryAfter/10+time.Millisecond)
		if ra > d {
			d = ra
		}
	}
	return d
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d < 0 {
		d = 0
	}
	if d > maxRetryAfter {
		d = maxRetryAfter
	}
	return d
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
