// Package upstream holds the HTTP clients of the services the admin
// interface reads and drives: identity, tokens, the audit logger, the visual
// renderer, and every service's /readyz and /metrics. Each call takes the
// bearer credential to present (the person's access token, or the internal
// key for audit records the admin interface writes itself) and translates
// the answer into the admininterface sentinel errors.
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"threatview/admininterface"
)

// maxBody bounds the JSON answers read into memory (a page of 1,000 audit
// records with bodies stays well below it).
const maxBody = 32 << 20

// Client calls one service at BaseURL.
type Client struct {
	BaseURL string
	HTTP    *http.Client
	// Timeout bounds one call when the context has no earlier deadline.
	Timeout time.Duration
}

// New returns a Client for the service at baseURL; hc may be nil.
func New(baseURL string, hc *http.Client, timeout time.Duration) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: hc, Timeout: timeout}
}

// errorBody is the JSON error every Threat View service answers with.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// StatusError maps a non-2xx answer to a *ServiceError carrying the
// service's message, which unwraps to a sentinel error.
func StatusError(service string, status int, body []byte) error {
	var eb errorBody
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &eb) == nil && eb.Error.Message != "" {
		msg = eb.Error.Message
	}
	if len(msg) > 300 {
		msg = msg[:300]
	}
	var base error
	switch {
	case status == http.StatusUnauthorized:
		base = admininterface.ErrUnauthorized
	case status == http.StatusForbidden:
		base = admininterface.ErrForbidden
	case status == http.StatusNotFound:
		base = admininterface.ErrNotFound
	case status >= 400 && status < 500:
		base = admininterface.ErrInvalid
	default:
		base = admininterface.ErrUnavailable
	}
	return &ServiceError{Base: base, Service: service, Status: status, Code: eb.Error.Code, Message: msg}
}

// ServiceError is a service's refusal or failure as it answered it: its
// status, and its own error code and message, which a page may show to the
// person as they are. It unwraps to the status's sentinel error.
type ServiceError struct {
	Base    error
	Service string
	Status  int
	Code    string
	Message string
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("%v: %s answered %d: %s", e.Base, e.Service, e.Status, e.Message)
}
func (e *ServiceError) Unwrap() error { return e.Base }

// do sends one request and returns the open response when it is 2xx; any
// other answer is closed and turned into an error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, bearer string, body any) (*http.Response, error) {
	h := http.Header{}
	if bearer != "" {
		h.Set("Authorization", "Bearer "+bearer)
	}
	return c.doHeader(ctx, method, path, query, h, body)
}

// doHeader is do with extra request headers.
func (c *Client) doHeader(ctx context.Context, method, path string, query url.Values, header http.Header, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	u := c.BaseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The path without its query: a query may carry what must not be
		// logged.
		return nil, fmt.Errorf("%w: %s %s%s: %v", admininterface.ErrUnavailable, method, c.BaseURL, path, withoutURL(err))
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		err := StatusError(c.BaseURL, resp.StatusCode, b)
		if resp.StatusCode == http.StatusTooManyRequests {
			return nil, &RetryError{Err: err, After: retryAfter(resp.Header.Get("Retry-After"))}
		}
		return nil, err
	}
	return resp, nil
}

// call sends one JSON request and decodes a JSON answer into out (nil skips
// the body).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, bearer string, body, out any) error {
	h := http.Header{}
	if bearer != "" {
		h.Set("Authorization", "Bearer "+bearer)
	}
	return c.callQuery(ctx, method, path, query, h, body, out)
}

// callHeader is call with extra request headers and no query.
func (c *Client) callHeader(ctx context.Context, method, path string, header http.Header, body, out any) error {
	return c.callQuery(ctx, method, path, nil, header, body, out)
}

func (c *Client) callQuery(ctx context.Context, method, path string, query url.Values, header http.Header, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	resp, err := c.doHeader(ctx, method, path, query, header, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(out); err != nil {
		return fmt.Errorf("%w: decode %s %s: %v", admininterface.ErrUnavailable, method, path, err)
	}
	return nil
}

// RetryError is a 429: the caller may try again After (0: not said).
// It unwraps to the status's sentinel (ErrInvalid).
type RetryError struct {
	Err   error
	After time.Duration
}

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

func retryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t).Round(time.Second))
	}
	return 0
}

// withoutURL drops the request URL from a transport error (a *url.Error
// names it, query and all).
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// IsAuth reports whether err means the person must sign in again.
func IsAuth(err error) bool { return errors.Is(err, admininterface.ErrUnauthorized) }
