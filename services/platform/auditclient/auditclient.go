// Package auditclient posts audit records to the audit logger
// (POST /v1/audit with the internal key). It answers only once the records
// are durable, so a nil error means they are kept.
package auditclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"threatview/platform/wire"
)

// ErrUnavailable is wrapped by every error when Options.Unavailable is not
// set: the records are not known to be durable.
var ErrUnavailable = errors.New("audit logger unavailable")

// Options configure a Client.
type Options struct {
	// Timeout bounds one POST; 0 leaves it to the caller's context.
	Timeout time.Duration
	// Unavailable is wrapped by every error (e.g. the service's own
	// ErrAuditUnavailable); default ErrUnavailable.
	Unavailable error
	// HTTP is the client to use; default one that keeps 16 idle
	// connections.
	HTTP *http.Client
}

// Client posts to one audit logger.
type Client struct {
	url string
	key string
	opt Options
}

// New returns a Client for the audit logger at baseURL.
func New(baseURL, internalKey string, opt Options) *Client {
	if opt.Unavailable == nil {
		opt.Unavailable = ErrUnavailable
	}
	if opt.HTTP == nil {
		opt.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}}
	}
	return &Client{url: strings.TrimRight(baseURL, "/") + "/v1/audit", key: internalKey, opt: opt}
}

// Post sends body, a complete wire.AuditBatch, and returns nil once the
// audit logger answered 2xx.
func (c *Client) Post(ctx context.Context, body []byte) error {
	if c.opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opt.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", c.opt.Unavailable, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.opt.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", c.opt.Unavailable, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w: audit logger answered %d: %s", c.opt.Unavailable, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// Audit posts one record (e.g. as a tokens.Auditor).
func (c *Client) Audit(ctx context.Context, rec wire.AuditRecord) error {
	body, err := json.Marshal(wire.AuditBatch{V: wire.Version, Records: []wire.AuditRecord{rec}})
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	return c.Post(ctx, body)
}
