package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/collector"
	"threatview/collector/tokenauth"
	"threatview/platform/mq"
)

// warmTokens fills the token cache in bulk (tokenauth.Warm) before the
// collector serves, so the apps that arrive first find their tokens cached;
// while the tokens service cannot answer it tries again in the background
// for a few seconds, and without it the cache fills token by token.
func warmTokens(ctx context.Context, tokens *tokenauth.Client, log *slog.Logger) {
	attempt := func() bool {
		t0 := time.Now()
		n, err := tokens.Warm(ctx)
		if err != nil {
			log.Warn("token cache not warmed", "err", err)
			return false
		}
		log.Info("token cache warmed", "tokens", n, "took_ms", time.Since(t0).Milliseconds())
		return true
	}
	if attempt() {
		return
	}
	go func() {
		for range 4 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if attempt() {
				return
			}
		}
	}()
}

// followRevocations subscribes to the revocations topic and applies every
// announcement to the token cache until ctx ends. The subscription
// reconnects by itself; the cache tracks its breaks (see tokenauth).
func followRevocations(ctx context.Context, broker mq.Config, topic string, tokens *tokenauth.Client, log *slog.Logger) {
	sub := mq.Subscribe(ctx, broker, topic, 100, log)
	go tokens.Follow(ctx, sub)
}

// withClientAddr tells the token cache which client a request comes from,
// for its per-client cap on lookups of unknown tokens. The address is the
// one enrichment uses (X-Forwarded-For only from trusted proxies).
func withClientAddr(next http.Handler, trusted []netip.Prefix) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			ip := collector.ClientIP(r.RemoteAddr, r.Header.Get("X-Forwarded-For"), trusted)
			if ip.IsValid() {
				r = r.WithContext(tokenauth.WithClient(r.Context(), ip))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// registerFeedStats exports the lookup caps' and the revocation feed's
// counters.
func registerFeedStats(reg prometheus.Registerer, c *tokenauth.Client) {
	counter := func(name, help string, f func(tokenauth.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(c.Stats())) })
	}
	reg.MustRegister(
		counter("collector_token_lookups_limited_total", "Checks of tokens not cached answered 429/503 with Retry-After at once by a lookup cap (not looked up).", func(s tokenauth.Stats) uint64 { return s.Limited }),
		counter("collector_token_cache_warmed_total", "Active tokens loaded into the cache in bulk at start.", func(s tokenauth.Stats) uint64 { return s.Warmed }),
		counter("collector_token_revocations_total", "Revocations received on the revocations topic.", func(s tokenauth.Stats) uint64 { return s.Revocations }),
		counter("collector_token_revocation_feed_breaks_total", "Times the revocations subscription was found disconnected.", func(s tokenauth.Stats) uint64 { return s.FeedBreaks }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "collector_token_cache_entries",
			Help:        "Token cache entries by kind (active tokens; negative: unknown or revoked tokens); together at most 100000.",
			ConstLabels: prometheus.Labels{"kind": "active"},
		}, func() float64 { a, _ := c.Entries(); return float64(a) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "collector_token_cache_entries",
			Help:        "Token cache entries by kind (active tokens; negative: unknown or revoked tokens); together at most 100000.",
			ConstLabels: prometheus.Labels{"kind": "negative"},
		}, func() float64 { _, n := c.Entries(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "collector_token_revocation_feed_up",
			Help: "1 while the revocations subscription is connected (stale tokens may then be served during a tokens outage).",
		}, func() float64 {
			if c.FeedUp() {
				return 1
			}
			return 0
		}),
	)
}
