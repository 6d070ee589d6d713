package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"threatview/collector"
	"threatview/collector/publish"
	"threatview/platform/httpserver"
	"threatview/platform/mq"
	"threatview/platform/wire"
)

// Config is the data collector's configuration, read from the environment.
type Config struct {
	HTTP     httpserver.Config
	Broker   mq.Config
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`

	// EventsQueue is the destination events are published to.
	EventsQueue string `env:"COLLECTOR_EVENTS_QUEUE" envDefault:"/queue/threatview.events"`
	// Shards is how many queues events are spread over: 1 publishes to
	// EventsQueue itself; k > 1 publishes an app's events to
	// EventsQueue.<i>, i = wire.EventsShard(app id, k), each queue with its
	// own processor. Every collector of a deployment must use the same
	// count (docs/scaling.md, "Shards": how to change it).
	Shards int `env:"COLLECTOR_SHARDS" envDefault:"1"`

	// TokensURL is the tokens service, asked (with InternalKey) to introspect
	// tokens the cache does not hold.
	TokensURL        string        `env:"TOKENS_SERVICE_URL" envDefault:"http://127.0.0.1:8083"`
	InternalKey      string        `env:"INTERNAL_KEY" secret:"true"`
	TokenCacheTTL    time.Duration `env:"TOKENS_CACHE_TTL" envDefault:"30s"`
	TokenNegativeTTL time.Duration `env:"TOKENS_NEGATIVE_TTL" envDefault:"5s"`
	TokensTimeout    time.Duration `env:"TOKENS_TIMEOUT" envDefault:"2s"`
	// TokensRevocationsTopic is where the tokens service announces
	// revocations; the collector applies them at once. Blank: not followed,
	// and then no token is served stale during a tokens outage.
	TokensRevocationsTopic string        `env:"TOKENS_REVOCATIONS_TOPIC" envDefault:"/topic/threatview.revocations"`
	TokensMaxStale         time.Duration `env:"TOKENS_MAX_STALE" envDefault:"5m"`
	// Lookups of tokens not in the cache, per second: in all, and per client
	// address (/64 for IPv6). Over the cap such a token gets 429 with
	// Retry-After at once (it was not looked up, so it is not refused).
	TokensUnknownRate float64 `env:"TOKENS_UNKNOWN_LOOKUP_RATE" envDefault:"50"`
	TokensClientRate  float64 `env:"TOKENS_CLIENT_LOOKUP_RATE" envDefault:"5"`
	// TokensWarmLimit is how many active tokens (most recently used first)
	// the collector loads in one request when it starts.
	TokensWarmLimit int `env:"TOKENS_WARM_LIMIT" envDefault:"50000"`

	// AuditURL is the audit logger; blank turns auditing off.
	AuditURL     string        `env:"AUDITLOGGER_SERVICE_URL"`
	AuditTimeout time.Duration `env:"COLLECTOR_AUDIT_TIMEOUT" envDefault:"5s"`
	// AuditQueue is where an accepted request's audit record is published,
	// in the same broker transaction as its events (the audit worker's
	// queue); the audit logger's HTTP API only takes refused requests'
	// best-effort records.
	AuditQueue string `env:"COLLECTOR_AUDIT_QUEUE" envDefault:"/queue/threatview.audit"`

	// GeoIPPath is a MaxMind-format country database; blank means every
	// country is ZZ. The file is reloaded when it changes.
	GeoIPPath   string        `env:"GEOIP_DB_PATH"`
	GeoIPReload time.Duration `env:"GEOIP_RELOAD_INTERVAL" envDefault:"5s"`

	// ClientIP is how much of the client address is kept after the country
	// lookup: truncate (IPv4 /24, IPv6 /48; the default), none, or full.
	ClientIP string `env:"COLLECTOR_CLIENT_IP" envDefault:"truncate"`
	// TrustedProxies are CIDRs whose X-Forwarded-For is believed.
	TrustedProxies []string `env:"COLLECTOR_TRUSTED_PROXIES" envSeparator:","`
	// CORSOrigins are the browser origins allowed to post ("*" for any).
	CORSOrigins []string `env:"COLLECTOR_CORS_ORIGINS" envSeparator:","`

	// MaxInFlight caps concurrent ingest requests; beyond it 503.
	MaxInFlight int `env:"COLLECTOR_MAX_IN_FLIGHT" envDefault:"4096"`
	// MaxBodyBytesInFlight caps the decompressed body bytes held by the
	// requests in flight; beyond it 503. 0 sizes it from GOMEMLIMIT
	// (httpapi.DefaultMaxBodyBytes).
	MaxBodyBytesInFlight int64 `env:"COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT" envDefault:"0"`
	// RateLimit is requests per second per app; 0 turns it off.
	RateLimit float64 `env:"COLLECTOR_RATE_LIMIT" envDefault:"0"`
	RateBurst int     `env:"COLLECTOR_RATE_BURST" envDefault:"200"`

	// CoalesceWindow is how long a message stays open for more requests
	// before it is sent (it is sent later anyway while every broker
	// connection is busy); 0 sends as soon as a connection is free. The
	// broker's cost is per message, so the window sets it: 8 ms holds the
	// stack to about 125 transactions a second at any rate above that
	// (docs/performance.md has the measurements behind the default).
	CoalesceWindow time.Duration `env:"COLLECTOR_COALESCE_WINDOW" envDefault:"8ms"`
	// CoalesceFullRate is the request rate (per second, over about the last
	// second) from which a message stays open the whole CoalesceWindow;
	// below it the window shrinks in proportion (at 100 req/s, a fifth of
	// it), so a quiet collector answers without waiting for company while a
	// busy one still gathers. 0 always waits the whole window.
	CoalesceFullRate float64       `env:"COLLECTOR_COALESCE_FULL_RATE" envDefault:"500"`
	MaxMessageBytes  int           `env:"COLLECTOR_MAX_MESSAGE_BYTES" envDefault:"524288"`
	MaxMessageEvents int           `env:"COLLECTOR_MAX_MESSAGE_EVENTS" envDefault:"5000"`
	PublishTimeout   time.Duration `env:"COLLECTOR_PUBLISH_TIMEOUT" envDefault:"5s"`
	// UserIDKeys are the secrets user ids are pseudonymised with,
	// "k2:<hex>,k1:<hex>" (at least 16 bytes each; the first makes new
	// pseudonyms, the others stay for the renderer's searches). Blank: user
	// ids are dropped, never kept.
	UserIDKeys string `env:"COLLECTOR_USER_ID_KEYS" secret:"true"`
	// LocationGrid is the grid, in degrees, a location is coarsened to
	// before anything keeps it (0.1° is about 11 km of latitude).
	LocationGrid float64 `env:"COLLECTOR_LOCATION_GRID" envDefault:"0.1"`
	// RetryAfter is the Retry-After sent with 503 and the floor of 429's.
	RetryAfter time.Duration `env:"COLLECTOR_RETRY_AFTER" envDefault:"1s"`
}

// Validate checks relations between fields; the error names the variable.
func (c *Config) Validate() error {
	if c.InternalKey == "" {
		return errors.New("INTERNAL_KEY is required (it authenticates the collector to the tokens service)")
	}
	if c.TokensURL == "" {
		return errors.New("TOKENS_SERVICE_URL is required")
	}
	if !strings.HasPrefix(c.EventsQueue, "/queue/") {
		return fmt.Errorf("COLLECTOR_EVENTS_QUEUE %q must start with /queue/", c.EventsQueue)
	}
	if c.Shards < 1 || c.Shards > publish.MaxShards {
		return fmt.Errorf("COLLECTOR_SHARDS must be from 1 to %d", publish.MaxShards)
	}
	if _, err := collector.ParseIPMode(c.ClientIP); err != nil {
		return fmt.Errorf("COLLECTOR_CLIENT_IP: %w", err)
	}
	if _, err := collector.ParsePrefixes(c.TrustedProxies); err != nil {
		return fmt.Errorf("COLLECTOR_TRUSTED_PROXIES: %w", err)
	}
	if _, err := wire.ParsePseudonymKeys(c.UserIDKeys); err != nil {
		return fmt.Errorf("COLLECTOR_USER_ID_KEYS: %w", err)
	}
	switch {
	case !(c.LocationGrid >= 0.001 && c.LocationGrid <= 10):
		return errors.New("COLLECTOR_LOCATION_GRID must be from 0.001 to 10 (degrees)")
	case c.MaxInFlight <= 0:
		return errors.New("COLLECTOR_MAX_IN_FLIGHT must be positive")
	case c.MaxBodyBytesInFlight != 0 && c.MaxBodyBytesInFlight < collector.MaxRequestBytes:
		return fmt.Errorf("COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT must be 0 (from GOMEMLIMIT) or at least %d (one full request)", collector.MaxRequestBytes)
	case c.RateLimit < 0:
		return errors.New("COLLECTOR_RATE_LIMIT must not be negative")
	case c.RateLimit > 0 && c.RateBurst <= 0:
		return errors.New("COLLECTOR_RATE_BURST must be positive when COLLECTOR_RATE_LIMIT is set")
	case c.CoalesceWindow < 0:
		return errors.New("COLLECTOR_COALESCE_WINDOW must not be negative")
	case c.CoalesceFullRate < 0:
		return errors.New("COLLECTOR_COALESCE_FULL_RATE must not be negative")
	case c.MaxMessageBytes < collector.MaxEventBytes:
		return fmt.Errorf("COLLECTOR_MAX_MESSAGE_BYTES must be at least %d", collector.MaxEventBytes)
	case c.MaxMessageEvents < collector.MaxBatchEvents:
		return fmt.Errorf("COLLECTOR_MAX_MESSAGE_EVENTS must be at least %d", collector.MaxBatchEvents)
	case c.PublishTimeout <= 0:
		return errors.New("COLLECTOR_PUBLISH_TIMEOUT must be positive")
	case c.AuditTimeout <= 0:
		return errors.New("COLLECTOR_AUDIT_TIMEOUT must be positive")
	case c.AuditURL != "" && c.AuditQueue == "":
		return errors.New("COLLECTOR_AUDIT_QUEUE must not be empty when AUDITLOGGER_SERVICE_URL is set")
	case c.TokensWarmLimit < 1 || c.TokensWarmLimit > 100_000:
		return errors.New("TOKENS_WARM_LIMIT must be from 1 to 100000")
	case c.RetryAfter < time.Second:
		return errors.New("COLLECTOR_RETRY_AFTER must be at least 1s")
	}
	return nil
}
