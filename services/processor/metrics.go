package processor

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the processor's own Prometheus metrics (prefix processor_).
type Metrics struct {
	BatchEvents  prometheus.Histogram
	BatchSeconds prometheus.Histogram
	EventsStored prometheus.Counter
	Duplicates   prometheus.Counter
	DeadLettered prometheus.Counter
	Isolated     *prometheus.CounterVec
	WriteErrors  prometheus.Counter
	AckErrors    prometheus.Counter
	// AggregationLag stays 0: the rollups are folded in the transaction
	// that stores the events (kept for the status page, the dashboard and
	// the ThreatViewAggregationLag alert, which read it).
	AggregationLag prometheus.Gauge
	Leader         prometheus.Gauge
	// RateCap is the events/s the writes are paced to (processor.Yield);
	// 0 while unpaced.
	RateCap prometheus.Gauge
	// PartitionsAhead is set after each partition upkeep from the catalog.
	PartitionsAhead prometheus.Gauge
	// Suppressed counts events dropped because their device is suppressed.
	Suppressed prometheus.Counter
	// Suppressions is how many devices the processor's cache suppresses.
	Suppressions prometheus.Gauge
}

// NewMetrics registers the processor's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		BatchEvents: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "processor_batch_events",
			Help:    "Events per written batch.",
			Buckets: []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 5000},
		}),
		BatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "processor_batch_duration_seconds",
			Help:    "Time from a batch being closed to its messages being acked, retries included.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		EventsStored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "processor_events_stored_total",
			Help: "Events inserted into events.events.",
		}),
		Duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "processor_events_duplicate_total",
			Help: "Events skipped because they were already stored or repeated in their batch.",
		}),
		DeadLettered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "processor_messages_dead_lettered_total",
			Help: "Messages sent to the dead-letter queue because they can never be stored: one per isolated request, or a whole message that cannot be split into requests.",
		}),
		Isolated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "processor_requests_isolated_total",
			Help: "Requests set aside and dead-lettered alone while the other requests of their message were stored, by reason (envelope: does not decode or breaks the envelope's rules; unstorable: fails the storable checks; refused: Postgres refused its rows).",
		}, []string{"reason"}),
		WriteErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "processor_batch_write_errors_total",
			Help: "Failed batch writes; each is retried with backoff.",
		}),
		AckErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "processor_ack_errors_total",
			Help: "Acks that failed after a commit; the broker redelivers and the duplicate is skipped.",
		}),
		AggregationLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "processor_aggregation_lag_seconds",
			Help: "How far the rollups lag behind the stored events: always 0, since they are folded in the transaction that stores the events.",
		}),
		RateCap: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "processor_write_rate_cap_events_per_second",
			Help: "Events a second the writes are paced to while the CPU is contended (PROCESSOR_YIELD_CPU_PRESSURE); 0 while unpaced.",
		}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "processor_leader",
			Help: "1 while this replica holds the leader lock and consumes.",
		}),
		PartitionsAhead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "processor_partitions_ahead_months",
			Help: "Whole months after the current one that have a partition in both events.events and facts.facts, read from the catalog after each partition upkeep (0 means next month's rows have nowhere to go).",
		}),
		Suppressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "processor_events_suppressed_total",
			Help: "Events dropped unstored because their (app, device) is under an erasure's suppression (events.suppressions).",
		}),
		Suppressions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "processor_suppressions",
			Help: "Suppressed (app, device) pairs in the processor's cache, refreshed every PROCESSOR_SUPPRESSION_REFRESH.",
		}),
	}
	reg.MustRegister(m.Suppressed, m.Suppressions, m.BatchEvents, m.BatchSeconds, m.EventsStored, m.Duplicates, m.DeadLettered, m.Isolated,
		m.WriteErrors, m.AckErrors, m.AggregationLag, m.RateCap, m.Leader, m.PartitionsAhead)
	return m
}
