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

// Config is the admin interface's configuration, read from the environment.
type Config struct {
	HTTP     httpserver.Config
	Broker   mq.Config
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`

	// IdentityURL is identity's base URL (sign-in).
	IdentityURL string `env:"IDENTITY_SERVICE_URL,required"`
	// TokensURL is the tokens service's base URL.
	TokensURL string `env:"TOKENS_SERVICE_URL,required"`
	// AuditURL is the audit logger's base URL (search, export, and the
	// records of dead-letter actions).
	AuditURL string `env:"AUDITLOGGER_SERVICE_URL,required"`
	// RendererURL is the visual renderer's base URL; blank leaves the
	// dashboards page empty with a note.
	RendererURL string `env:"VISUALRENDERER_SERVICE_URL"`
	// AlertsURL is the alerts service's base URL; blank leaves the alerts
	// pages out (they answer 404 with a note).
	AlertsURL string `env:"ALERTS_SERVICE_URL"`
	// PrivacyURL is the privacy service's base URL (erasure requests and
	// suppressions); blank leaves the privacy pages out (they answer 404
	// with a note).
	PrivacyURL string `env:"PRIVACY_SERVICE_URL"`
	// InternalKey authorizes POST /v1/audit for the UI's own audit records.
	InternalKey string `env:"INTERNAL_KEY,required" secret:"true"`
	// ExportKey is the admin key (ADMIN_KEY), with which an audit export
	// reads its pages after the first: the person's access token
	// authorises the export at its start, and lives 5 minutes at most,
	// less than a long export takes. Blank: every page with the person's
	// token, so an export that outlives it ends visibly cut.
	ExportKey string `env:"ADMIN_KEY" secret:"true"`

	// SessionKey seals session cookies: 64 hex digits, identical on every
	// replica (a Secret in the chart).
	SessionKey string `env:"ADMINUI_SESSION_KEY,required" secret:"true"`
	// IdentityForwarderKey is identity's IDENTITY_FORWARDER_KEY: with it the
	// UI names each browser's address to identity, which then throttles
	// failed sign-ins per browser (without it, per UI: one attacker's
	// wrong passwords would lock every operator out). Blank: derived from
	// INTERNAL_KEY (httpserver.ForwarderKey), as identity derives it.
	IdentityForwarderKey string `env:"ADMINUI_IDENTITY_FORWARDER_KEY" secret:"true"`
	// TrustedProxies are CIDRs in front of the UI (the ingress) whose
	// X-Forwarded-For names the browser.
	TrustedProxies []string `env:"ADMINUI_TRUSTED_PROXIES" envSeparator:","`
	// SecureCookies marks cookies Secure; turn it off only for a plain-HTTP
	// development stack on loopback (the local stack does).
	SecureCookies bool `env:"ADMINUI_SECURE_COOKIES" envDefault:"true"`
	// OIDC offers "Sign in with your company account" through identity's
	// OIDC sign-in; identity's IDENTITY_OIDC_REDIRECT_URL must then be this
	// site's /login/oidc/callback.
	OIDC bool `env:"ADMINUI_OIDC"`
	// CollectorPublicURL is the collector as apps reach it, for the curl
	// shown with a new token.
	CollectorPublicURL string `env:"ADMINUI_COLLECTOR_PUBLIC_URL,required"`
	// StatusTargets lists the services the status page checks, as
	// name=url pairs separated by commas, in display order. The first entry
	// whose name contains "collector" is also sampled for the rates of the
	// last hour.
	StatusTargets string `env:"ADMINUI_STATUS_TARGETS,required"`
	// SampleInterval is how often the collector's counters are sampled.
	SampleInterval time.Duration `env:"ADMINUI_SAMPLE_INTERVAL" envDefault:"30s"`
	// UpstreamTimeout bounds one call to another service.
	UpstreamTimeout time.Duration `env:"ADMINUI_UPSTREAM_TIMEOUT" envDefault:"10s"`
	// QueueDepthCap bounds how many messages a queue depth counts.
	QueueDepthCap int `env:"ADMINUI_QUEUE_DEPTH_CAP" envDefault:"1000"`
	// EventsShards is the collectors' COLLECTOR_SHARDS: the status page
	// shows each shard's events queue and the DLQ page each one's dead
	// letters (wire.EventsQueues).
	EventsShards int `env:"ADMINUI_EVENTS_SHARDS" envDefault:"1"`

	// EventsDatabaseURL and AuditDatabaseDSN let the retention page read
	// partitions and archive records (a read-only role is enough); blank
	// leaves that database out.
	EventsDatabaseURL string `env:"EVENTS_DATABASE_URL" secret:"true"`
	AuditDatabaseDSN  string `env:"AUDIT_DATABASE_DSN" secret:"true"`
	// CleanupCommand is the retention cleanup command, run with --dry-run
	// (program and arguments separated by spaces, e.g. /usr/local/bin/cleanup);
	// it gets the CLEANUP_*, ARCHIVE_*, AWS_* and database variables of this
	// process. Blank leaves the dry run out of the retention page.
	CleanupCommand string `env:"ADMINUI_CLEANUP_COMMAND"`
}

// cleanupEnvPrefixes are the variables passed on to the cleanup command.
var cleanupEnvPrefixes = []string{"CLEANUP_", "ARCHIVE_", "AWS_"}

// cleanupEnvNames are passed on by exact name.
var cleanupEnvNames = []string{"EVENTS_DATABASE_URL", "AUDIT_DATABASE_DSN", "PATH", "HOME", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// target is one parsed entry of StatusTargets.
type target struct{ name, url string }

func parseTargets(s string) ([]target, error) {
	var out []target
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, u, ok := strings.Cut(part, "=")
		if !ok || name == "" || !isHTTPURL(u) {
			return nil, fmt.Errorf("ADMINUI_STATUS_TARGETS entry %q is not name=http(s)://host:port", part)
		}
		out = append(out, target{name: name, url: u})
	}
	if len(out) == 0 {
		return nil, errors.New("ADMINUI_STATUS_TARGETS names no service")
	}
	return out, nil
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Validate checks the URLs, the session key and the limits; the error
// names the variable.
func (c *Config) Validate() error {
	for _, v := range []struct{ name, val string }{
		{"IDENTITY_SERVICE_URL", c.IdentityURL}, {"TOKENS_SERVICE_URL", c.TokensURL},
		{"AUDITLOGGER_SERVICE_URL", c.AuditURL}, {"ADMINUI_COLLECTOR_PUBLIC_URL", c.CollectorPublicURL},
	} {
		if !isHTTPURL(v.val) {
			return fmt.Errorf("%s %q is not an http(s) URL", v.name, v.val)
		}
	}
	for _, v := range []struct{ name, val string }{
		{"VISUALRENDERER_SERVICE_URL", c.RendererURL}, {"ALERTS_SERVICE_URL", c.AlertsURL}, {"PRIVACY_SERVICE_URL", c.PrivacyURL},
	} {
		if v.val != "" && !isHTTPURL(v.val) {
			return fmt.Errorf("%s %q is not an http(s) URL", v.name, v.val)
		}
	}
	if len(c.SessionKey) != 64 || strings.Trim(strings.ToLower(c.SessionKey), "0123456789abcdef") != "" {
		return errors.New("ADMINUI_SESSION_KEY must be 64 hex digits (32 random bytes: openssl rand -hex 32)")
	}
	if _, err := httpserver.ParsePrefixes(c.TrustedProxies); err != nil {
		return fmt.Errorf("ADMINUI_TRUSTED_PROXIES: %w", err)
	}
	if _, err := parseTargets(c.StatusTargets); err != nil {
		return err
	}
	if c.SampleInterval < time.Second {
		return fmt.Errorf("ADMINUI_SAMPLE_INTERVAL must be at least 1s, got %s", c.SampleInterval)
	}
	if c.UpstreamTimeout <= 0 {
		return fmt.Errorf("ADMINUI_UPSTREAM_TIMEOUT must be positive, got %s", c.UpstreamTimeout)
	}
	if c.QueueDepthCap < 1 || c.QueueDepthCap > 100000 {
		return fmt.Errorf("ADMINUI_QUEUE_DEPTH_CAP must be from 1 to 100000, got %d", c.QueueDepthCap)
	}
	if c.EventsShards < 1 || c.EventsShards > 64 {
		return fmt.Errorf("ADMINUI_EVENTS_SHARDS must be from 1 to 64, got %d", c.EventsShards)
	}
	return nil
}
