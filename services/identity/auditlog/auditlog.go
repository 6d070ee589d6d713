// Package auditlog sends the identity service's audit records to the audit
// logger (POST /v1/audit with the internal key).
package auditlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"threatview/identity"
	"threatview/platform/wire"
)

// Client posts audit records to one audit logger.
type Client struct {
	url     string
	key     string
	timeout time.Duration
	http    *http.Client
}

var _ identity.Auditor = (*Client)(nil)

// New returns a Client for the audit logger at baseURL. hc may be nil.
func New(baseURL, internalKey string, timeout time.Duration, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{url: strings.TrimRight(baseURL, "/") + "/v1/audit", key: internalKey, timeout: timeout, http: hc}
}

// Audit posts rec and returns nil once the audit logger answered 2xx (it
// answers only when the record is durable). Any failure wraps
// identity.ErrAuditUnavailable.
func (c *Client) Audit(ctx context.Context, rec wire.AuditRecord) error {
	body, err := json.Marshal(wire.AuditBatch{V: wire.Version, Records: []wire.AuditRecord{rec}})
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", identity.ErrAuditUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", identity.ErrAuditUnavailable, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w: audit logger answered %d: %s", identity.ErrAuditUnavailable, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}
