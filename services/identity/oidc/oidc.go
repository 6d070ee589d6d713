// Package oidc signs people in through the company's identity provider
// (Okta, Entra ID, Cognito, Keycloak…) with the OpenID Connect authorization
// code flow and PKCE (S256), using github.com/coreos/go-oidc/v3 and
// golang.org/x/oauth2.
//
// Start stores the sign-in's state (only its SHA-256), PKCE verifier and
// nonce in the identity database, so any replica can finish it; Finish takes
// them back (once), exchanges the code with the verifier, verifies the ID
// token (signature, issuer, audience, expiry, nonce), completes its claims
// from the userinfo endpoint when it lacks the username or groups, and maps
// the groups claim to Threat View roles.
package oidc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"threatview/identity"
)

// Config is the identity provider's client registration and the claim
// mapping.
type Config struct {
	Issuer       string
	ClientID     string
	ClientSecret string // blank for a public client (PKCE only)
	RedirectURL  string // this service's /v1/oidc/callback as the browser reaches it
	Scopes       []string
	// GroupsClaim names the ID token claim holding the person's groups.
	GroupsClaim string
	// UsernameClaim names the claim used as username (lower-cased).
	UsernameClaim string
	// RoleMap maps a group to the roles it grants (identity.ParseRoleMap).
	RoleMap map[string][]string
}

// StateStore keeps pending sign-ins (identity.Store implements it).
type StateStore interface {
	SaveOIDCState(ctx context.Context, s identity.OIDCState) error
	TakeOIDCState(ctx context.Context, hash [sha256.Size]byte, now time.Time) (identity.OIDCState, error)
}

// stateTTL is how long a person has to sign in at the provider.
const stateTTL = 10 * time.Minute

// Client runs the flow against one provider. Discovery happens at the first
// sign-in (and again after a failure), so the service starts while the
// provider is away.
type Client struct {
	cfg   Config
	store StateStore
	http  *http.Client
	log   *slog.Logger

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *gooidc.IDTokenVerifier
	provider *gooidc.Provider
}

// New returns a Client. hc may be nil.
func New(cfg Config, store StateStore, hc *http.Client, log *slog.Logger) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{gooidc.ScopeOpenID, "profile", "email"}
	}
	if !slices.Contains(cfg.Scopes, gooidc.ScopeOpenID) {
		cfg.Scopes = append([]string{gooidc.ScopeOpenID}, cfg.Scopes...)
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = "preferred_username"
	}
	return &Client{cfg: cfg, store: store, http: hc, log: log}
}

func (c *Client) ctx(ctx context.Context) context.Context {
	return gooidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, c.http), c.http)
}

func (c *Client) discover(ctx context.Context) (*oauth2.Config, *gooidc.IDTokenVerifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oauth != nil {
		return c.oauth, c.verifier, nil
	}
	p, err := gooidc.NewProvider(c.ctx(ctx), c.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("discover identity provider %s: %w", c.cfg.Issuer, err)
	}
	c.oauth = &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: c.cfg.RedirectURL, Scopes: c.cfg.Scopes}
	// The verifier fetches the provider's keys with the client of the
	// context it was made with; keep ours in a context that outlives ctx.
	c.verifier = p.VerifierContext(c.ctx(context.Background()), &gooidc.Config{ClientID: c.cfg.ClientID})
	c.provider = p
	return c.oauth, c.verifier, nil
}

func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Start returns the provider's authorization URL and the state.
func (c *Client) Start(ctx context.Context) (string, string, error) {
	oc, _, err := c.discover(ctx)
	if err != nil {
		return "", "", err
	}
	state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
	st := identity.OIDCState{StateHash: sha256.Sum256([]byte(state)), Verifier: verifier, Nonce: nonce, ExpiresAt: time.Now().UTC().Add(stateTTL)}
	if err := c.store.SaveOIDCState(ctx, st); err != nil {
		return "", "", err
	}
	return oc.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), gooidc.Nonce(nonce)), state, nil
}

// Finish completes the sign-in and returns the person: the issuer and
// subject that name them, their username and their roles.
func (c *Client) Finish(ctx context.Context, state, code string) (identity.OIDCPerson, error) {
	oc, verifier, err := c.discover(ctx)
	if err != nil {
		return identity.OIDCPerson{}, err
	}
	st, err := c.store.TakeOIDCState(ctx, sha256.Sum256([]byte(state)), time.Now().UTC())
	if err != nil {
		return identity.OIDCPerson{}, fmt.Errorf("oidc state: %w", err)
	}
	tok, err := oc.Exchange(c.ctx(ctx), code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		c.log.Warn("oidc code exchange failed", "err", err)
		return identity.OIDCPerson{}, fmt.Errorf("%w: code exchange failed", identity.ErrBadCredentials)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return identity.OIDCPerson{}, fmt.Errorf("%w: the provider returned no ID token", identity.ErrBadCredentials)
	}
	idt, err := verifier.Verify(c.ctx(ctx), raw)
	if err != nil {
		c.log.Warn("oidc id token refused", "err", err)
		return identity.OIDCPerson{}, fmt.Errorf("%w: ID token refused", identity.ErrBadCredentials)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		return identity.OIDCPerson{}, fmt.Errorf("%w: ID token nonce mismatch", identity.ErrBadCredentials)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return identity.OIDCPerson{}, fmt.Errorf("%w: ID token claims: %v", identity.ErrBadCredentials, err)
	}
	if claims[c.cfg.GroupsClaim] == nil || claims[c.cfg.UsernameClaim] == nil {
		c.addUserInfo(ctx, tok, idt.Subject, claims)
	}
	username, _ := claims[c.cfg.UsernameClaim].(string)
	if username == "" {
		return identity.OIDCPerson{}, fmt.Errorf("%w: the ID token has no %s claim", identity.ErrForbidden, c.cfg.UsernameClaim)
	}
	return identity.OIDCPerson{Issuer: idt.Issuer, Subject: idt.Subject, Username: username, Roles: c.roles(claims[c.cfg.GroupsClaim])}, nil
}

// addUserInfo adds the claims of the provider's userinfo endpoint that the ID
// token lacks (many providers leave groups or the username out of the ID
// token unless told otherwise). The ID token's claims win, and the userinfo
// must be about the same subject (OpenID Connect Core 5.3.2).
func (c *Client) addUserInfo(ctx context.Context, tok *oauth2.Token, subject string, claims map[string]any) {
	c.mu.Lock()
	p := c.provider
	c.mu.Unlock()
	ui, err := p.UserInfo(c.ctx(ctx), oauth2.StaticTokenSource(tok))
	if err != nil {
		c.log.Warn("oidc userinfo failed", "err", err)
		return
	}
	if ui.Subject != subject {
		c.log.Warn("oidc userinfo is about another subject; ignored")
		return
	}
	var extra map[string]any
	if err := ui.Claims(&extra); err != nil {
		c.log.Warn("oidc userinfo claims unreadable", "err", err)
		return
	}
	for k, v := range extra {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
}

// roles maps a groups claim (a list of strings, or one string) to roles.
func (c *Client) roles(v any) []string {
	var groups []string
	switch g := v.(type) {
	case string:
		groups = []string{g}
	case []any:
		for _, x := range g {
			if s, ok := x.(string); ok {
				groups = append(groups, s)
			}
		}
	}
	var roles []string
	for _, g := range groups {
		for _, r := range c.cfg.RoleMap[g] {
			if !slices.Contains(roles, r) {
				roles = append(roles, r)
			}
		}
	}
	slices.Sort(roles)
	return roles
}
