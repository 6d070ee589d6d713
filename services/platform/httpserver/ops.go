package httpserver

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"threatview/platform/cli"
)

// Check reports whether one dependency is usable. It must honour ctx.
type Check func(ctx context.Context) error

// NewRegistry returns a metrics registry with the Go runtime and process
// collectors registered and, in a command started by cli.Main or
// cli.MainArgs, NAME_build_info with cli.Version (see NewBuildInfo).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if name := cli.Name(); name != "" {
		reg.MustRegister(NewBuildInfo(name, cli.Version))
	}
	return reg
}

// MountOps adds /healthz (touches no dependency), /readyz (runs every check
// with a 1 s timeout, 503 naming the failures) and /metrics to r.
func MountOps(r chi.Router, reg *prometheus.Registry, checks map[string]Check) {
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", func(w http.ResponseWriter, req *http.Request) {
		names := make([]string, 0, len(checks))
		for name := range checks {
			names = append(names, name)
		}
		sort.Strings(names)
		failed := map[string]string{}
		for _, name := range names {
			ctx, cancel := context.WithTimeout(req.Context(), time.Second)
			if err := checks[name](ctx); err != nil {
				failed[name] = err.Error()
			}
			cancel()
		}
		if len(failed) > 0 {
			WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "failed": failed})
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
}

// Instrument returns middleware that counts requests by route, method and
// status and observes their latency, as PREFIX_http_requests_total and
// PREFIX_http_request_duration_seconds.
func Instrument(reg prometheus.Registerer, prefix string) func(http.Handler) http.Handler {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prefix + "_http_requests_total",
		Help: "HTTP requests by route, method and status.",
	}, []string{"route", "method", "status"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    prefix + "_http_request_duration_seconds",
		Help:    "HTTP request latency by route.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"route", "method"})
	reg.MustRegister(requests, latency)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(sw, r)
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			}
			requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
			latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
		})
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
