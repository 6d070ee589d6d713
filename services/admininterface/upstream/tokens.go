package upstream

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Token is an app token as the tokens service lists it (never its secret).
type Token struct {
	ID         string     `json:"id"`
	AppID      string     `json:"app_id"`
	Name       string     `json:"name"`
	Active     bool       `json:"active"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// NewToken is a created token with its plain secret, shown once.
type NewToken struct {
	Token
	Secret string `json:"token"`
}

// Tokens is the tokens service's client.
type Tokens struct{ *Client }

// List returns up to limit tokens (GET /v1/tokens).
func (c Tokens) List(ctx context.Context, bearer string, limit int) ([]Token, error) {
	var out struct {
		Tokens []Token `json:"tokens"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/tokens", url.Values{"limit": {strconv.Itoa(limit)}}, bearer, nil, &out)
	return out.Tokens, err
}

// ListApp returns up to limit tokens of one app, newest first
// (GET /v1/tokens?app_id=).
func (c Tokens) ListApp(ctx context.Context, bearer, appID string, limit int) ([]Token, error) {
	var out struct {
		Tokens []Token `json:"tokens"`
	}
	q := url.Values{"app_id": {appID}, "limit": {strconv.Itoa(limit)}}
	err := c.call(ctx, http.MethodGet, "/v1/tokens", q, bearer, nil, &out)
	return out.Tokens, err
}

// Create issues a token for app (POST /v1/tokens); a refused app id or name
// is ErrInvalid with the service's reason.
func (c Tokens) Create(ctx context.Context, bearer, appID, name string) (NewToken, error) {
	var out NewToken
	err := c.call(ctx, http.MethodPost, "/v1/tokens", nil, bearer, map[string]string{"app_id": appID, "name": name}, &out)
	return out, err
}

// Get returns one token (GET /v1/tokens/{id}); ErrNotFound when unknown.
func (c Tokens) Get(ctx context.Context, bearer, id string) (Token, error) {
	var out Token
	err := c.call(ctx, http.MethodGet, "/v1/tokens/"+url.PathEscape(id), nil, bearer, nil, &out)
	return out, err
}

// Revoke revokes a token (DELETE /v1/tokens/{id}); ErrNotFound when unknown.
func (c Tokens) Revoke(ctx context.Context, bearer, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, bearer, nil, nil)
}
