package forward

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the forwarders' series (alerts_forward_*). A nil *Metrics
// records nothing.
type Metrics struct {
	Delivered *prometheus.CounterVec
	Failures  *prometheus.CounterVec
	Lag       *prometheus.GaugeVec
	Skipped   *prometheus.CounterVec
}

// NewMetrics registers the forwarders' series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "alerts_forward_events_total",
			Help: "Threat events sent to a forwarder's destination (at least once: a resent batch counts again)."}, []string{"forwarder"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "alerts_forward_failures_total",
			Help: "Batches a forwarder's destination refused or did not take (sent again after a backoff), and failed starts of its sink."}, []string{"forwarder"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "alerts_forward_lag_seconds",
			Help: "Age (receive time to now) of the newest event a forwarder has sent; 0 when it has caught up."}, []string{"forwarder"}),
	}
	m.Skipped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "alerts_forward_skipped_total",
		Help: "Outbox rows a forwarder passed unsent because its backlog reached ALERTS_FORWARD_MAX_BACKLOG (its destination failing)."}, []string{"forwarder"})
	reg.MustRegister(m.Delivered, m.Failures, m.Lag, m.Skipped)
	return m
}

func (m *Metrics) delivered(id string, n int, lag time.Duration) {
	if m == nil {
		return
	}
	m.Delivered.WithLabelValues(id).Add(float64(n))
	m.Lag.WithLabelValues(id).Set(lag.Seconds())
}

func (m *Metrics) failed(id string) {
	if m == nil {
		return
	}
	m.Failures.WithLabelValues(id).Inc()
}

func (m *Metrics) lag(id string, d time.Duration) {
	if m == nil {
		return
	}
	m.Lag.WithLabelValues(id).Set(d.Seconds())
}

func (m *Metrics) skipped(id string, n int64) {
	if m == nil {
		return
	}
	m.Skipped.WithLabelValues(id).Add(float64(n))
}
