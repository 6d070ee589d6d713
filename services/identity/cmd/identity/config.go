package main

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"threatview/identity"
	"threatview/platform/httpserver"
)

// Config is the identity service's configuration, read from the environment
// (the chart's test checks every variable it sets against it).
type Config struct {
	HTTP        httpserver.Config
	DatabaseDSN string `env:"IDENTITY_DATABASE_DSN,required" secret:"true"`
	// SigningKeys are Ed25519 seeds (hex or base64), comma-separated: the
	// first signs access tokens, all are published in the JWK set.
	SigningKeys string `env:"IDENTITY_SIGNING_KEYS,required" secret:"true"`
	// AdminKey is accepted as role admin (automation); blank refuses it.
	AdminKey string `env:"ADMIN_KEY" secret:"true"`
	// InternalKey authenticates the service to the audit logger.
	InternalKey string `env:"INTERNAL_KEY" secret:"true"`
	LogLevel    string `env:"LOG_LEVEL" envDefault:"info"`

	// AccessTTL is the access token lifetime, at most 4m50s: with the
	// verifiers' 10 s of clock leeway, a disabled person's token stops
	// working everywhere within 5 minutes.
	AccessTTL  time.Duration `env:"IDENTITY_ACCESS_TOKEN_TTL" envDefault:"4m50s"`
	RefreshTTL time.Duration `env:"IDENTITY_REFRESH_TOKEN_TTL" envDefault:"12h"`
	// OIDCSessionTTL bounds a sign-in through the identity provider (its
	// refresh tokens do not slide past it): a person removed at the
	// provider loses access within it plus one access token's lifetime.
	OIDCSessionTTL time.Duration `env:"IDENTITY_OIDC_SESSION_TTL" envDefault:"1h"`
	// RefreshGrace is how long a used refresh token may be presented again
	// (two page loads at once) and still be renewed; later reuse ends the
	// sign-in as stolen. At most 60s; 0 turns it off.
	RefreshGrace time.Duration `env:"IDENTITY_REFRESH_REUSE_GRACE" envDefault:"10s"`

	MaxFailuresUser int           `env:"IDENTITY_LOGIN_MAX_FAILURES_PER_USER" envDefault:"5"`
	MaxFailuresIP   int           `env:"IDENTITY_LOGIN_MAX_FAILURES_PER_IP" envDefault:"20"`
	FailureWindow   time.Duration `env:"IDENTITY_LOGIN_FAILURE_WINDOW" envDefault:"15m"`
	// TrustedProxies are CIDRs whose X-Forwarded-For names the client.
	TrustedProxies []string `env:"IDENTITY_TRUSTED_PROXIES" envSeparator:","`
	// ForwarderKey lets a service that signs people in on their browsers'
	// behalf (the admin interface, with the same key as
	// ADMINUI_IDENTITY_FORWARDER_KEY) name the browser's address in
	// X-Forwarded-For, so throttling counts each browser, not the UI.
	// Blank: derived from INTERNAL_KEY (httpserver.ForwarderKey), as the
	// admin interface derives it.
	ForwarderKey string `env:"IDENTITY_FORWARDER_KEY" secret:"true"`

	Argon2MemoryKiB uint32 `env:"IDENTITY_ARGON2_MEMORY_KIB" envDefault:"19456"`
	Argon2Time      uint32 `env:"IDENTITY_ARGON2_TIME" envDefault:"2"`
	Argon2Threads   uint8  `env:"IDENTITY_ARGON2_THREADS" envDefault:"1"`
	// HashConcurrency caps argon2 hashes running at once (memory bound).
	HashConcurrency int `env:"IDENTITY_HASH_CONCURRENCY" envDefault:"4"`

	// BootstrapUser, when set, is created at start as an admin with
	// BootstrapPassword unless a person of that name exists.
	BootstrapUser     string `env:"IDENTITY_BOOTSTRAP_ADMIN_USER"`
	BootstrapPassword string `env:"IDENTITY_BOOTSTRAP_ADMIN_PASSWORD" secret:"true"`

	// RescueOwner, when set, is the rescue path for an organisation locked
	// out of its last Account Owner: at start the local person of that name
	// is created if missing, unlocked, made an owner and given
	// RescuePassword (audited as identity-rescue). Remove both once signed
	// in: while set, every start resets that password.
	RescueOwner    string `env:"IDENTITY_RESCUE_OWNER"`
	RescuePassword string `env:"IDENTITY_RESCUE_PASSWORD" secret:"true"`

	// AuditURL is the audit logger's base URL; blank turns auditing off.
	AuditURL     string        `env:"AUDITLOGGER_SERVICE_URL"`
	AuditTimeout time.Duration `env:"AUDITLOGGER_TIMEOUT" envDefault:"5s"`

	// OIDC sign-in is on when OIDCIssuer is set.
	OIDCIssuer        string   `env:"IDENTITY_OIDC_ISSUER"`
	OIDCClientID      string   `env:"IDENTITY_OIDC_CLIENT_ID"`
	OIDCClientSecret  string   `env:"IDENTITY_OIDC_CLIENT_SECRET" secret:"true"`
	OIDCRedirectURL   string   `env:"IDENTITY_OIDC_REDIRECT_URL"`
	OIDCScopes        []string `env:"IDENTITY_OIDC_SCOPES" envSeparator:"," envDefault:"openid,profile,email"`
	OIDCGroupsClaim   string   `env:"IDENTITY_OIDC_GROUPS_CLAIM" envDefault:"groups"`
	OIDCUsernameClaim string   `env:"IDENTITY_OIDC_USERNAME_CLAIM" envDefault:"preferred_username"`
	// OIDCRoleMap maps groups to roles: "group=role,group=role".
	OIDCRoleMap string `env:"IDENTITY_OIDC_ROLE_MAP"`
	// SecureCookies marks the OIDC state cookie Secure; turn off only for
	// plain-HTTP development.
	SecureCookies bool `env:"IDENTITY_SECURE_COOKIES" envDefault:"true"`
}

// Validate checks relations between fields; the error names the variable.
func (c *Config) Validate() error {
	if _, err := identity.ParseKeyring(c.SigningKeys); err != nil {
		return fmt.Errorf("IDENTITY_SIGNING_KEYS: %w", err)
	}
	switch {
	case c.AccessTTL < 30*time.Second || c.AccessTTL > identity.MaxAccessTTL:
		return fmt.Errorf("IDENTITY_ACCESS_TOKEN_TTL must be between 30s and %s (it bounds, with 10 s of clock leeway, how long a disabled person's token works), got %s", identity.MaxAccessTTL, c.AccessTTL)
	case c.RefreshTTL < c.AccessTTL:
		return fmt.Errorf("IDENTITY_REFRESH_TOKEN_TTL must be at least IDENTITY_ACCESS_TOKEN_TTL, got %s", c.RefreshTTL)
	case c.OIDCSessionTTL < c.AccessTTL || c.OIDCSessionTTL > c.RefreshTTL:
		return fmt.Errorf("IDENTITY_OIDC_SESSION_TTL must be between IDENTITY_ACCESS_TOKEN_TTL and IDENTITY_REFRESH_TOKEN_TTL, got %s", c.OIDCSessionTTL)
	case c.RefreshGrace < 0 || c.RefreshGrace > time.Minute:
		return fmt.Errorf("IDENTITY_REFRESH_REUSE_GRACE must be between 0 and 1m, got %s", c.RefreshGrace)
	case c.MaxFailuresUser < 1:
		return errors.New("IDENTITY_LOGIN_MAX_FAILURES_PER_USER must be at least 1")
	case c.MaxFailuresIP < 1:
		return errors.New("IDENTITY_LOGIN_MAX_FAILURES_PER_IP must be at least 1")
	case c.FailureWindow < time.Second:
		return errors.New("IDENTITY_LOGIN_FAILURE_WINDOW must be at least 1s")
	case c.Argon2MemoryKiB < 64 || c.Argon2MemoryKiB > 1<<20:
		return errors.New("IDENTITY_ARGON2_MEMORY_KIB must be between 64 and 1048576")
	case c.Argon2Time < 1 || c.Argon2Threads < 1:
		return errors.New("IDENTITY_ARGON2_TIME and IDENTITY_ARGON2_THREADS must be at least 1")
	case c.HashConcurrency < 1:
		return errors.New("IDENTITY_HASH_CONCURRENCY must be at least 1")
	case c.ForwarderKey != "" && len(c.ForwarderKey) < 32:
		return errors.New("IDENTITY_FORWARDER_KEY must be at least 32 characters")
	case c.AdminKey != "" && c.AdminKey == c.InternalKey:
		return errors.New("ADMIN_KEY and INTERNAL_KEY must differ")
	case c.AuditTimeout <= 0:
		return errors.New("AUDITLOGGER_TIMEOUT must be positive")
	case c.AuditURL != "" && c.InternalKey == "":
		return errors.New("INTERNAL_KEY is required when AUDITLOGGER_SERVICE_URL is set")
	case (c.BootstrapUser == "") != (c.BootstrapPassword == ""):
		return errors.New("IDENTITY_BOOTSTRAP_ADMIN_USER and IDENTITY_BOOTSTRAP_ADMIN_PASSWORD go together")
	case (c.RescueOwner == "") != (c.RescuePassword == ""):
		return errors.New("IDENTITY_RESCUE_OWNER and IDENTITY_RESCUE_PASSWORD go together")
	}
	if c.RescueOwner != "" {
		if _, err := identity.NormalizeUsername(c.RescueOwner); err != nil {
			return fmt.Errorf("IDENTITY_RESCUE_OWNER: %w", err)
		}
		if err := identity.ValidatePassword(c.RescuePassword); err != nil {
			return fmt.Errorf("IDENTITY_RESCUE_PASSWORD: %w", err)
		}
	}
	if c.BootstrapUser != "" {
		if _, err := identity.NormalizeUsername(c.BootstrapUser); err != nil {
			return fmt.Errorf("IDENTITY_BOOTSTRAP_ADMIN_USER: %w", err)
		}
		if err := identity.ValidatePassword(c.BootstrapPassword); err != nil {
			return fmt.Errorf("IDENTITY_BOOTSTRAP_ADMIN_PASSWORD: %w", err)
		}
	}
	if err := httpURL("AUDITLOGGER_SERVICE_URL", c.AuditURL); err != nil {
		return err
	}
	if _, err := prefixes(c.TrustedProxies); err != nil {
		return fmt.Errorf("IDENTITY_TRUSTED_PROXIES: %w", err)
	}
	if c.OIDCIssuer != "" {
		if c.OIDCClientID == "" || c.OIDCRedirectURL == "" {
			return errors.New("IDENTITY_OIDC_CLIENT_ID and IDENTITY_OIDC_REDIRECT_URL are required with IDENTITY_OIDC_ISSUER")
		}
		for name, v := range map[string]string{"IDENTITY_OIDC_ISSUER": c.OIDCIssuer, "IDENTITY_OIDC_REDIRECT_URL": c.OIDCRedirectURL} {
			if err := httpURL(name, v); err != nil {
				return err
			}
		}
		m, err := identity.ParseRoleMap(c.OIDCRoleMap)
		if err != nil {
			return fmt.Errorf("IDENTITY_OIDC_ROLE_MAP: %w", err)
		}
		if len(m) == 0 {
			return errors.New("IDENTITY_OIDC_ROLE_MAP is required with IDENTITY_OIDC_ISSUER (no group would grant a role)")
		}
	}
	return nil
}

func httpURL(name, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q is not an http(s) URL", name, v)
	}
	return nil
}

// TrustedPrefixes returns IDENTITY_TRUSTED_PROXIES parsed (checked by
// Validate).
func (c *Config) TrustedPrefixes() []netip.Prefix {
	p, _ := prefixes(c.TrustedProxies)
	return p
}

func prefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return nil, fmt.Errorf("%q is not a CIDR or address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
