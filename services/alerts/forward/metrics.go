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
}

// NewMetrics registers the forwarders' series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "alerts_forward_events_total",
			Help: "Threat events sent to a forwarder's destination (at least once: a resent batch counts again)."}, []string{"forwarder"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "alerts_forward_failures_total",
			Help: "Batches a forwarder's destination refused or did not take (sent again after a backoff)."}, []string{"forwarder"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "alerts_forward_lag_seconds",
			Help: "Age (receive time to now) of the newest event a forwarder has sent; 0 when it has caught up."}, []string{"forwarder"}),
	}
	reg.MustRegister(m.Delivered, m.Failures, m.Lag)
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
