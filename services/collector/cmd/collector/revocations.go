package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/collector"
	"threatview/collector/tokenauth"
	"threatview/platform/mq"
)

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
		counter("collector_token_lookups_limited_total", "Checks of unknown tokens answered 401 at once by a lookup cap.", func(s tokenauth.Stats) uint64 { return s.Limited }),
		counter("collector_token_revocations_total", "Revocations received on the revocations topic.", func(s tokenauth.Stats) uint64 { return s.Revocations }),
		counter("collector_token_revocation_feed_breaks_total", "Times the revocations subscription was found disconnected.", func(s tokenauth.Stats) uint64 { return s.FeedBreaks }),
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
