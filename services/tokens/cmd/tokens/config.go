package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"threatview/platform/httpserver"
	"threatview/platform/mq"
)

// Config is the tokens service's configuration, read from the environment.
type Config struct {
	HTTP        httpserver.Config
	DatabaseDSN string `env:"TOKENS_DATABASE_DSN,required" secret:"true"`
	AdminKey    string `env:"ADMIN_KEY,required" secret:"true"`
	InternalKey string `env:"INTERNAL_KEY,required" secret:"true"`
	LogLevel    string `env:"LOG_LEVEL" envDefault:"info"`
	// LastUsedInterval bounds how often last_used_at is written per token.
	LastUsedInterval time.Duration `env:"TOKEN_LAST_USED_INTERVAL" envDefault:"1m"`
	// AuditURL is the audit logger's base URL; blank turns auditing off.
	AuditURL string `env:"AUDITLOGGER_SERVICE_URL"`
	// AuditTimeout bounds one POST to the audit logger.
	AuditTimeout time.Duration `env:"AUDITLOGGER_TIMEOUT" envDefault:"5s"`
	// Broker carries the revocation announcements (STOMP_*).
	Broker mq.Config
	// RevocationsTopic is where revocations are announced; blank turns the
	// announcements off (collectors then learn of a revocation only when
	// their cache entry expires, and serve nothing stale).
	RevocationsTopic string `env:"TOKENS_REVOCATIONS_TOPIC" envDefault:"/topic/threatview.revocations"`
	// IdentityJWKSURL is the identity service's JWK set
	// (/.well-known/jwks.json); with it, people's access tokens with role
	// admin are accepted besides the admin key. Blank: the admin key only.
	IdentityJWKSURL string `env:"IDENTITY_JWKS_URL"`
}

// Validate checks relations between fields; the error names the variable.
func (c *Config) Validate() error {
	if c.AdminKey == c.InternalKey {
		return errors.New("ADMIN_KEY and INTERNAL_KEY must differ: the internal key must not grant admin calls")
	}
	if c.LastUsedInterval <= 0 {
		return fmt.Errorf("TOKEN_LAST_USED_INTERVAL must be positive, got %s", c.LastUsedInterval)
	}
	if c.AuditTimeout <= 0 {
		return fmt.Errorf("AUDITLOGGER_TIMEOUT must be positive, got %s", c.AuditTimeout)
	}
	if c.RevocationsTopic != "" && !strings.HasPrefix(c.RevocationsTopic, "/topic/") {
		return fmt.Errorf("TOKENS_REVOCATIONS_TOPIC %q must be a topic (/topic/...) so every collector gets each revocation", c.RevocationsTopic)
	}
	if c.AuditURL != "" {
		u, err := url.Parse(c.AuditURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("AUDITLOGGER_SERVICE_URL %q is not an http(s) URL", c.AuditURL)
		}
	}
	if c.IdentityJWKSURL != "" {
		u, err := url.Parse(c.IdentityJWKSURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("IDENTITY_JWKS_URL %q is not an http(s) URL", c.IdentityJWKSURL)
		}
	}
	return nil
}
