// Package identity is the visual renderer's client of the identity service:
// people sign in to the dashboards with their username and password there,
// and the renderer keeps the short-lived access token and the refresh token
// identity answers with.
package identity

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"threatview/platform/httpserver"
)

// Errors of the client.
var (
	// ErrRefused means identity refused the credentials: a wrong username
	// or password, or a used, revoked or expired refresh token.
	ErrRefused = errors.New("refused by identity")
	// ErrUnavailable means identity did not answer usefully (down, slow,
	// 5xx).
	ErrUnavailable = errors.New("identity unavailable")
)

// ThrottledError is identity's 429 for too many failed sign-ins: try again
// after RetryAfter.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many failed sign-ins; retry after %s", e.RetryAfter)
}

// Session is a sign-in as identity answers it.
type Session struct {
	AccessToken      string    `json:"access_token"`
	ExpiresAt        time.Time `json:"expires_at"`
	RefreshToken     string    `json:"refresh_token"`
	RefreshExpiresAt time.Time `json:"refresh_expires_at"`
	User             struct {
		Username string   `json:"username"`
		Roles    []string `json:"roles"`
	} `json:"user"`
}

// Client calls identity at BaseURL.
type Client struct {
	BaseURL string
	HTTP    *http.Client
	// ForwarderKey is identity's IDENTITY_FORWARDER_KEY: presented with the
	// browser's address, so identity throttles and audits sign-ins per
	// browser rather than per renderer (blank: not forwarded).
	ForwarderKey string
}

// ForwarderKey is the key the renderer presents as X-Forwarder-Key:
// forwarderKey (RENDERER_IDENTITY_FORWARDER_KEY) when set, else the one
// derived from the deployment's internal key (httpserver.ForwarderKey), as
// identity and the admin interface derive it when IDENTITY_FORWARDER_KEY is
// blank. Both blank: "" (no address is forwarded).
func ForwarderKey(forwarderKey, internalKey string) string {
	return cmp.Or(forwarderKey, httpserver.ForwarderKey(internalKey))
}

// New returns a client with a timeout per call.
func New(baseURL, forwarderKey string, timeout time.Duration) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: timeout}, ForwarderKey: forwarderKey}
}

// Login signs a person in (POST /v1/login) from the browser at client
// (zero: unknown). Errors: ErrRefused, *ThrottledError, ErrUnavailable.
func (c *Client) Login(ctx context.Context, username, password string, client netip.Addr) (Session, error) {
	h := http.Header{}
	if client.IsValid() && c.ForwarderKey != "" {
		h.Set("X-Forwarded-For", client.String())
		h.Set("X-Forwarder-Key", c.ForwarderKey)
	}
	var s Session
	err := c.post(ctx, "/v1/login", h, map[string]string{"username": username, "password": password}, &s)
	return s, err
}

// Refresh trades a refresh token for a new session (POST /v1/refresh); the
// old one is used up. Errors: ErrRefused, ErrUnavailable.
func (c *Client) Refresh(ctx context.Context, refreshToken string) (Session, error) {
	var s Session
	err := c.post(ctx, "/v1/refresh", nil, map[string]string{"refresh_token": refreshToken}, &s)
	return s, err
}

// Logout revokes the sign-in's refresh tokens (POST /v1/logout).
func (c *Client) Logout(ctx context.Context, refreshToken string) error {
	return c.post(ctx, "/v1/logout", nil, map[string]string{"refresh_token": refreshToken}, nil)
}

func (c *Client) post(ctx context.Context, path string, h http.Header, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%w: POST %s: %v", ErrUnavailable, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("%w: POST %s: %v", ErrUnavailable, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &ThrottledError{RetryAfter: time.Duration(max(secs, 1)) * time.Second}
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: POST %s answered %d", ErrRefused, path, resp.StatusCode)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("%w: POST %s answered %d", ErrUnavailable, path, resp.StatusCode)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: POST %s: decode: %v", ErrUnavailable, path, err)
	}
	return nil
}
