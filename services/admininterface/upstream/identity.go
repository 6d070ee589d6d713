package upstream

import (
	"context"
	"net/http"

	"threatview/admininterface"
)

// Identity is the identity service's client.
type Identity struct{ *Client }

// Login signs a person in with a password (POST /v1/login). A refused
// password is ErrUnauthorized.
func (c Identity) Login(ctx context.Context, username, password string) (admininterface.Login, error) {
	var out admininterface.Login
	err := c.call(ctx, http.MethodPost, "/v1/login", nil, "", map[string]string{"username": username, "password": password}, &out)
	return out, err
}

// Refresh trades a refresh token for a new session (POST /v1/refresh); the
// old refresh token is used up. A used, revoked or expired one is
// ErrUnauthorized.
func (c Identity) Refresh(ctx context.Context, refreshToken string) (admininterface.Login, error) {
	var out admininterface.Login
	err := c.call(ctx, http.MethodPost, "/v1/refresh", nil, "", map[string]string{"refresh_token": refreshToken}, &out)
	return out, err
}

// Logout revokes the sign-in's refresh tokens (POST /v1/logout).
func (c Identity) Logout(ctx context.Context, refreshToken string) error {
	return c.call(ctx, http.MethodPost, "/v1/logout", nil, "", map[string]string{"refresh_token": refreshToken}, nil)
}

// Me returns the person an access token belongs to (GET /v1/me); a token
// identity no longer accepts is ErrUnauthorized.
func (c Identity) Me(ctx context.Context, accessToken string) (admininterface.User, error) {
	var out admininterface.User
	err := c.call(ctx, http.MethodGet, "/v1/me", nil, accessToken, nil, &out)
	return out, err
}
