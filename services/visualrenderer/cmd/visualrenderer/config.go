package main

import (
	"fmt"
	"net/url"
	"time"

	"threatview/platform/httpserver"
)

// Config is the visual renderer's configuration, from the environment.
type Config struct {
	HTTP httpserver.Config
	// DatabaseURL is a postgres:// URL of the events DB, for a role that can
	// only SELECT the facts schema (every connection is read-only anyway).
	DatabaseURL string `env:"RENDERER_DATABASE_URL,required" secret:"true"`
	// DBMaxConns bounds the pool.
	DBMaxConns int32 `env:"RENDERER_DB_MAX_CONNS" envDefault:"8"`
	// AdminKey is accepted as a bearer credential and in the sign-in form.
	AdminKey string `env:"ADMIN_KEY,required" secret:"true"`
	// IdentityURL is the identity service's base URL; its public keys
	// (/.well-known/jwks.json) verify people's access tokens. Blank: only
	// the admin key is accepted.
	IdentityURL string `env:"IDENTITY_SERVICE_URL"`
	// SessionTTL is how long a dashboard sign-in lasts.
	SessionTTL time.Duration `env:"RENDERER_SESSION_TTL" envDefault:"8h"`
	// SecureCookies sets the Secure attribute on cookies; turn it off only
	// to use the dashboards over plain HTTP on a host other than localhost.
	SecureCookies bool   `env:"RENDERER_SECURE_COOKIES" envDefault:"true"`
	LogLevel      string `env:"LOG_LEVEL" envDefault:"info"`
}

// Validate checks relations the tags cannot express.
func (c *Config) Validate() error {
	if c.IdentityURL != "" {
		u, err := url.Parse(c.IdentityURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("IDENTITY_SERVICE_URL %q is not an http(s) URL", c.IdentityURL)
		}
	}
	if c.SessionTTL < time.Minute || c.SessionTTL > 7*24*time.Hour {
		return fmt.Errorf("RENDERER_SESSION_TTL %s: want 1m to 168h", c.SessionTTL)
	}
	if c.DBMaxConns < 1 {
		return fmt.Errorf("RENDERER_DB_MAX_CONNS %d: want at least 1", c.DBMaxConns)
	}
	return nil
}
