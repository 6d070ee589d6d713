package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collector's own metrics (HTTP request counts and latency
// come from httpserver.Instrument).
type Metrics struct {
	eventsAccepted prometheus.Counter
	rejections     *prometheus.CounterVec
	inFlight       prometheus.Gauge
	auditSkipped   prometheus.Counter

	publishSeconds  *prometheus.HistogramVec
	auditSeconds    *prometheus.HistogramVec
	messageEvents   prometheus.Histogram
	messageRequests *prometheus.HistogramVec
	messageBytes    prometheus.Histogram
}

var latencyBuckets = []float64{.0005, .001, .002, .004, .008, .015, .03, .06, .125, .25, .5, 1, 2.5, 5}

// NewMetrics registers the collector metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		eventsAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "collector_events_accepted_total",
			Help: "Events answered with 202 (durable on the broker).",
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collector_rejections_total",
			Help: "Ingest requests not accepted, by reason (the error code).",
		}, []string{"reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "collector_requests_in_flight",
			Help: "Ingest requests being handled.",
		}),
		auditSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "collector_rejection_audits_skipped_total",
			Help: "Refused requests (401, 403) not audited because their audit rate was exceeded.",
		}),
		publishSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "collector_publish_duration_seconds",
			Help:    "Time to make one coalesced message durable on the broker (send to receipt), by outcome.",
			Buckets: latencyBuckets,
		}, []string{"outcome"}),
		auditSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "collector_audit_duration_seconds",
			Help:    "Time to hand one coalesced batch of audit records to the audit logger, by outcome.",
			Buckets: latencyBuckets,
		}, []string{"outcome"}),
		messageEvents: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "collector_message_events",
			Help:    "Events per message published to the broker.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000},
		}),
		messageRequests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "collector_message_requests",
			Help:    "Requests coalesced into one message, by destination (events, audit).",
			Buckets: []float64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 500},
		}, []string{"destination"}),
		messageBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "collector_message_bytes",
			Help:    "Size of messages published to the broker.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 8),
		}),
	}
	reg.MustRegister(m.eventsAccepted, m.rejections, m.inFlight, m.auditSkipped, m.publishSeconds, m.auditSeconds,
		m.messageEvents, m.messageRequests, m.messageBytes)
	return m
}

func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// ObservePublish is the publish.Options.Observe of the events group.
func (m *Metrics) ObservePublish(requests, items, bytes int, d time.Duration, err error) {
	m.publishSeconds.WithLabelValues(outcome(err)).Observe(d.Seconds())
	m.messageEvents.Observe(float64(items))
	m.messageRequests.WithLabelValues("events").Observe(float64(requests))
	m.messageBytes.Observe(float64(bytes))
}

// ObserveAudit is the publish.Options.Observe of the audit group.
func (m *Metrics) ObserveAudit(requests, items, bytes int, d time.Duration, err error) {
	m.auditSeconds.WithLabelValues(outcome(err)).Observe(d.Seconds())
	m.messageRequests.WithLabelValues("audit").Observe(float64(requests))
}
