package main

import (
	"fmt"
	"net/url"

	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// Config is the visual renderer's configuration, from the environment.
type Config struct {
	HTTP httpserver.Config
	// DatabaseURL is a postgres:// URL of the events DB, for a role that can
	// only SELECT the facts schema (every connection is read-only anyway).
	DatabaseURL string `env:"RENDERER_DATABASE_URL,required" secret:"true"`
	// DBMaxConns bounds the pool.
	DBMaxConns int32 `env:"RENDERER_DB_MAX_CONNS" envDefault:"8"`
	// AdminKey is accepted as a bearer credential, for automation; people
	// sign in through identity instead. Blank: no admin key.
	AdminKey string `env:"ADMIN_KEY" secret:"true"`
	// IdentityURL is the identity service's base URL: people sign in to the
	// dashboards there, and its public keys (/.well-known/jwks.json) verify
	// their access tokens. Blank: only the admin key is accepted.
	IdentityURL string `env:"IDENTITY_SERVICE_URL"`
	// IdentityForwarderKey is identity's IDENTITY_FORWARDER_KEY: with it the
	// renderer names each browser's address to identity, which then
	// throttles failed sign-ins per browser rather than per renderer.
	// Blank: derived from INTERNAL_KEY (httpserver.ForwarderKey), as
	// identity derives it.
	IdentityForwarderKey string `env:"RENDERER_IDENTITY_FORWARDER_KEY" secret:"true"`
	// InternalKey is the deployment's shared internal key; the renderer only
	// derives the forwarder key from it and never sends it.
	InternalKey string `env:"INTERNAL_KEY" secret:"true"`
	// TrustedProxies are CIDRs in front of the renderer (the ingress) whose
	// X-Forwarded-For names the browser; that address is what the sign-in
	// passes on to identity. Empty: the connecting address.
	TrustedProxies []string `env:"RENDERER_TRUSTED_PROXIES" envSeparator:","`
	// SecureCookies sets the Secure attribute on cookies; turn it off only
	// to use the dashboards over plain HTTP on a host other than localhost.
	SecureCookies bool   `env:"RENDERER_SECURE_COOKIES" envDefault:"true"`
	LogLevel      string `env:"LOG_LEVEL" envDefault:"info"`
	// UserIDKeys are the collector's COLLECTOR_USER_ID_KEYS: with them a
	// search or timeline by a raw user id finds its pseudonyms (under every
	// key). Blank: users are looked up by pseudonym only.
	UserIDKeys string `env:"RENDERER_USER_ID_KEYS" secret:"true"`
	// AuditURL is the audit logger: searches of a device, session or user,
	// timelines and taxonomy changes are audited there (with INTERNAL_KEY).
	// Blank: not audited (logged).
	AuditURL string `env:"AUDITLOGGER_SERVICE_URL"`
	// AdminURL is the Administration Interface's public URL, as browsers
	// reach it: the pages link to it as the people's one home. Blank: no
	// link.
	AdminURL string `env:"RENDERER_ADMIN_URL"`
}

// Validate checks relations the tags cannot express.
func (c *Config) Validate() error {
	for _, v := range []struct{ name, url string }{{"IDENTITY_SERVICE_URL", c.IdentityURL}, {"RENDERER_ADMIN_URL", c.AdminURL}} {
		if v.url == "" {
			continue
		}
		u, err := url.Parse(v.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q is not an http(s) URL", v.name, v.url)
		}
	}
	if c.AdminKey == "" && c.IdentityURL == "" {
		return fmt.Errorf("neither IDENTITY_SERVICE_URL (people) nor ADMIN_KEY (automation) is set: nobody could use the renderer")
	}
	if _, err := httpserver.ParsePrefixes(c.TrustedProxies); err != nil {
		return fmt.Errorf("RENDERER_TRUSTED_PROXIES: %w", err)
	}
	if _, err := wire.ParsePseudonymKeys(c.UserIDKeys); err != nil {
		return fmt.Errorf("RENDERER_USER_ID_KEYS: %w", err)
	}
	if c.AuditURL != "" && c.InternalKey == "" {
		return fmt.Errorf("INTERNAL_KEY is required with AUDITLOGGER_SERVICE_URL")
	}
	if c.DBMaxConns < 1 {
		return fmt.Errorf("RENDERER_DB_MAX_CONNS %d: want at least 1", c.DBMaxConns)
	}
	return nil
}
