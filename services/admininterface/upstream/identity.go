package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"

	"threatview/admininterface"
)

// oidcStateCookie is the cookie identity binds an OIDC sign-in's state to.
const oidcStateCookie = "tv_oidc_state"

// Identity is the identity service's client.
type Identity struct {
	*Client
	// ForwarderKey is identity's IDENTITY_FORWARDER_KEY: presented with
	// the browser's address, so identity throttles and audits sign-ins per
	// browser rather than per admin interface.
	ForwarderKey string
}

// Login signs a person in with a password (POST /v1/login) from the
// browser at client (zero: unknown). A refused password is ErrUnauthorized;
// too many failures is a *RetryError (ErrInvalid) saying when to try again.
func (c Identity) Login(ctx context.Context, username, password string, client netip.Addr) (admininterface.Login, error) {
	var out admininterface.Login
	h := http.Header{}
	if client.IsValid() && c.ForwarderKey != "" {
		h.Set("X-Forwarded-For", client.String())
		h.Set("X-Forwarder-Key", c.ForwarderKey)
	}
	err := c.callHeader(ctx, http.MethodPost, "/v1/login", h, map[string]string{"username": username, "password": password}, &out)
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

// OIDCStart begins a sign-in through the company's identity provider
// (GET /v1/oidc/login): it returns the provider's URL to send the browser to
// and the sign-in's state, which must come back with the provider's
// redirect. ErrNotFound when identity has no provider configured.
func (c Identity) OIDCStart(ctx context.Context) (authURL, state string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/oidc/login", nil)
	if err != nil {
		return "", "", err
	}
	hc := *c.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("%w: GET /v1/oidc/login: %v", admininterface.ErrUnavailable, withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", "", StatusError(c.BaseURL, resp.StatusCode, b)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == oidcStateCookie {
			state = ck.Value
		}
	}
	authURL = resp.Header.Get("Location")
	if u, err := url.Parse(authURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || state == "" {
		return "", "", fmt.Errorf("%w: identity started an OIDC sign-in without a provider URL or state", admininterface.ErrUnavailable)
	}
	return authURL, state, nil
}

// OIDCFinish completes the sign-in with the provider's redirect parameters
// (GET /v1/oidc/callback), presenting state as identity's state cookie. A
// refused sign-in is ErrUnauthorized.
func (c Identity) OIDCFinish(ctx context.Context, query url.Values, state string) (admininterface.Login, error) {
	var out admininterface.Login
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/oidc/callback?"+query.Encode(), nil)
	if err != nil {
		return out, err
	}
	req.AddCookie(&http.Cookie{Name: oidcStateCookie, Value: state})
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		// Never the URL: it holds the provider's code and state.
		return out, fmt.Errorf("%w: GET /v1/oidc/callback: %v", admininterface.ErrUnavailable, withoutURL(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return out, StatusError(c.BaseURL, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("%w: decode the OIDC session: %v", admininterface.ErrUnavailable, err)
	}
	return out, nil
}
