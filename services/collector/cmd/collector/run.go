package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/collector"
	"threatview/collector/geoip"
	"threatview/collector/geoip/countries"
	"threatview/collector/httpapi"
	"threatview/collector/publish"
	"threatview/collector/tokenauth"
	"threatview/platform/auditclient"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/mq"
	"threatview/platform/wire"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultAddr = ":8080"

// run starts the collector and serves until ctx ends (tests use
// HTTP_ADDR=127.0.0.1:0 and find the address in the log).
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "collector", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	trusted, err := collector.ParsePrefixes(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("COLLECTOR_TRUSTED_PROXIES: %w", err)
	}
	ipMode, err := collector.ParseIPMode(cfg.ClientIP)
	if err != nil {
		return fmt.Errorf("COLLECTOR_CLIENT_IP: %w", err)
	}
	checks := map[string]httpserver.Check{}

	var locator collector.Locator
	if cfg.GeoIPPath != "" {
		geo, err := geoip.Open(cfg.GeoIPPath, log)
		if err != nil {
			return fmt.Errorf("GEOIP_DB_PATH: %w", err)
		}
		go geo.Watch(ctx, cfg.GeoIPReload)
		locator = geo
		checks["geoip"] = geo.Check
	} else {
		log.Warn("GEOIP_DB_PATH is blank: every event's country is ZZ")
	}

	tokens, err := tokenauth.New(tokenauth.Config{
		URL:         cfg.TokensURL,
		InternalKey: cfg.InternalKey,
		PositiveTTL: cfg.TokenCacheTTL,
		NegativeTTL: cfg.TokenNegativeTTL,
		Timeout:     cfg.TokensTimeout,
		MaxStale:    cfg.TokensMaxStale,
		UnknownRate: cfg.TokensUnknownRate,
		ClientRate:  cfg.TokensClientRate,
		WarmLimit:   cfg.TokensWarmLimit,
	}, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}})
	if err != nil {
		return fmt.Errorf("tokens client: %w", err)
	}

	warmTokens(ctx, tokens, log)

	reg := httpserver.NewRegistry()
	metrics := httpapi.NewMetrics(reg)
	registerTokenStats(reg, tokens)
	registerPlaceStats(reg)
	registerFeedStats(reg, tokens)
	if cfg.TokensRevocationsTopic != "" {
		followRevocations(ctx, cfg.Broker, cfg.TokensRevocationsTopic, tokens, log)
	} else {
		log.Warn("TOKENS_REVOCATIONS_TOPIC is blank: revocations wait for the cache TTL and nothing is served stale")
	}

	pub := mq.NewPublisher(cfg.Broker, log)
	defer pub.Close()
	checks["broker"] = pub.Ping
	exportBrokerStats(ctx, getenv, cfg.Broker, publish.ShardQueues(cfg.EventsQueue, cfg.Shards), reg, log)
	conns := cfg.Broker.Conns
	if conns <= 0 {
		conns = 1
	}
	eventOpts := publish.Options{
		Prefix:      publish.EventsPrefix,
		AuxPrefix:   publish.AuditPrefix,
		Suffix:      publish.Suffix,
		Window:      cfg.CoalesceWindow,
		FullRate:    cfg.CoalesceFullRate,
		MaxBytes:    cfg.MaxMessageBytes,
		MaxItems:    cfg.MaxMessageEvents,
		Concurrency: conns,
		Timeout:     cfg.PublishTimeout,
		Observe:     metrics.ObservePublish,
	}
	// With auditing on, each accepted request's audit record goes to the
	// audit queue in the same broker transaction as its events. One group
	// per shard queue: requests coalesce with their shard's others, and each
	// group may use every broker connection (the publisher's pool shares
	// them), so an idle shard leaves the others the whole pool.
	queues := publish.ShardQueues(cfg.EventsQueue, cfg.Shards)
	groups := make([]*publish.Group, len(queues))
	for i, q := range queues {
		if cfg.AuditURL != "" {
			groups[i] = publish.NewPaired(eventOpts, publish.ToBrokerTx(pub, q, cfg.AuditQueue, conns+1))
		} else {
			groups[i] = publish.New(eventOpts, publish.ToBroker(pub, q, conns+1))
		}
	}
	events := publish.NewShards(groups...)
	defer events.Flush()
	log.Info("events queues", "shards", len(queues), "queues", queues)

	var audit *publish.Group
	if cfg.AuditURL != "" {
		audit = publish.New(publish.Options{
			Prefix:      publish.AuditPrefix,
			Suffix:      publish.Suffix,
			Window:      cfg.CoalesceWindow,
			FullRate:    cfg.CoalesceFullRate,
			MaxBytes:    512 << 10,
			MaxItems:    500,
			Concurrency: 8,
			Timeout:     cfg.AuditTimeout,
			Observe:     metrics.ObserveAudit,
		}, publish.ToAuditLogger(auditclient.New(cfg.AuditURL, cfg.InternalKey, auditclient.Options{})))
		defer audit.Flush()
	} else {
		log.Warn("AUDITLOGGER_SERVICE_URL is blank: auditing is off")
	}

	users, _ := wire.ParsePseudonymKeys(cfg.UserIDKeys) // checked by Validate
	if users == nil {
		log.Warn("COLLECTOR_USER_ID_KEYS is blank: user ids are dropped")
	} else {
		log.Info("user ids pseudonymised", "key_id", users.KeyID())
	}

	h := httpapi.New(httpapi.Deps{
		Auth:         tokenAuth{tokens},
		Enricher:     collector.NewEnricher(locator, trusted).WithIPMode(ipMode).WithInvestigation(users, cfg.LocationGrid),
		Events:       groups[0],
		Shards:       events,
		Audit:        audit,
		Registry:     reg,
		Metrics:      metrics,
		Checks:       checks,
		Log:          log,
		MaxInFlight:  cfg.MaxInFlight,
		MaxBodyBytes: cfg.MaxBodyBytesInFlight,
		RateLimit:    cfg.RateLimit,
		RateBurst:    cfg.RateBurst,
		CORSOrigins:  cfg.CORSOrigins,
		RetryAfter:   cfg.RetryAfter,
	})
	h = withClientAddr(h, trusted)
	if err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, nil); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}

// tokenAuth adapts the tokens client to collector.Authenticator.
type tokenAuth struct{ c *tokenauth.Client }

func (t tokenAuth) Check(ctx context.Context, token string) (collector.Identity, error) {
	id, err := t.c.Check(ctx, token)
	switch {
	case err == nil:
		return collector.Identity{TokenID: id.TokenID, AppID: id.AppID}, nil
	case errors.Is(err, tokenauth.ErrUnauthorized):
		return collector.Identity{}, fmt.Errorf("%w: %w", collector.ErrUnauthorized, err)
	case errors.Is(err, tokenauth.ErrLookupLimited):
		// The token was not looked up: "busy, retry" (429, or 503 while the
		// tokens service is slow), with the wait the cap gives, never 401.
		var le *tokenauth.LimitedError
		if errors.As(err, &le) && le.InFlight {
			return collector.Identity{}, fmt.Errorf("check token: %w: %w", collector.ErrOverloaded, err)
		}
		return collector.Identity{}, fmt.Errorf("check token: %w: %w", collector.ErrRateLimited, err)
	default:
		return collector.Identity{}, fmt.Errorf("check token: %w: %w", collector.ErrUnavailable, err)
	}
}

// registerPlaceStats exports the counters of the location-country cache
// (one slot per grid cell, DefaultCacheCells of them): a low hit ratio
// means clients send more distinct cells than it holds.
func registerPlaceStats(reg prometheus.Registerer) {
	c, ok := collector.DefaultPlaces().(*countries.Cache)
	if !ok {
		return
	}
	stat := func(name, help string, f func(hits, misses int64) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			h, m, _ := c.Stats()
			return float64(f(h, m))
		})
	}
	reg.MustRegister(
		stat("collector_location_cache_hits_total", "Location country lookups answered from the per-cell cache.", func(h, _ int64) int64 { return h }),
		stat("collector_location_cache_misses_total", "Location country lookups not in the per-cell cache (a point-in-polygon search).", func(_, m int64) int64 { return m }),
	)
}

// registerTokenStats exports the token cache counters; the hit ratio is
// hits / (hits + misses).
func registerTokenStats(reg prometheus.Registerer, c *tokenauth.Client) {
	stat := func(name, help string, f func(tokenauth.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(c.Stats())) })
	}
	reg.MustRegister(
		stat("collector_token_cache_hits_total", "Token checks answered from the cache.", func(s tokenauth.Stats) uint64 { return s.Hits }),
		stat("collector_token_cache_misses_total", "Token checks that needed a lookup.", func(s tokenauth.Stats) uint64 { return s.Misses }),
		stat("collector_token_lookups_total", "Introspection requests sent to the tokens service.", func(s tokenauth.Stats) uint64 { return s.Lookups }),
		stat("collector_token_lookup_errors_total", "Introspection requests that failed.", func(s tokenauth.Stats) uint64 { return s.LookupErrors }),
		stat("collector_token_stale_served_total", "Checks answered from an expired entry during a tokens outage.", func(s tokenauth.Stats) uint64 { return s.StaleServed }),
	)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "collector_token_cache_hit_ratio",
		Help: "Token cache hits / (hits + misses) since start.",
	}, func() float64 {
		s := c.Stats()
		if s.Hits+s.Misses == 0 {
			return 0
		}
		return float64(s.Hits) / float64(s.Hits+s.Misses)
	}))
}
