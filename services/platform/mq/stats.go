package mq

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// BrokerStats are the figures ActiveMQ's statistics plugin
// (<statisticsBrokerPlugin/>) gives for the broker and one queue: what JMX
// would show, over STOMP.
type BrokerStats struct {
	StorePercent  float64 // storeUsage as a percentage of its limit
	StoreBytes    float64
	StoreLimit    float64
	MemoryPercent float64 // the broker's memoryUsage as a percentage of its limit
	QueueSize     float64 // messages on the queue
	Enqueued      float64 // messages sent to the queue since the broker started
	Dequeued      float64 // messages acknowledged since the broker started
	QueueMemPct   float64 // the queue's memory usage as a percentage of its memoryLimit
}

// ErrNoStatistics is returned when the broker does not answer a statistics
// request: the plugin is not configured, or the broker is stalled.
var ErrNoStatistics = errors.New("no answer from the broker's statistics plugin")

// StatsReader asks the statistics plugin for BrokerStats over one STOMP
// connection of its own, opened on first use and again after a failure.
type StatsReader struct {
	cfg   Config
	queue string // queue name without /queue/
	log   *slog.Logger

	mu   sync.Mutex
	sess *session
	sub  *stomp.Subscription
	seq  int
}

// NewStatsReader reads the statistics of queue (a name such as
// "threatview.events" or "/queue/threatview.events").
func NewStatsReader(cfg Config, queue string, log *slog.Logger) *StatsReader {
	return &StatsReader{cfg: cfg.withDefaults(), queue: strings.TrimPrefix(queue, "/queue/"), log: log}
}

// Close closes the reader's connection.
func (r *StatsReader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reset()
}

func (r *StatsReader) reset() {
	if r.sess != nil {
		r.sess.close(r.cfg.CloseTimeout)
	}
	r.sess, r.sub = nil, nil
}

// Read asks for the broker's and the queue's statistics.
func (r *StatsReader) Read(ctx context.Context) (BrokerStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s BrokerStats
	if r.sess == nil {
		sess, err := dial(ctx, r.cfg, r.log)
		if err != nil {
			return s, err
		}
		// A temporary queue lives as long as this connection; the plugin
		// answers there as a MapMessage, which the broker writes as XML
		// (XStream, which the broker needs on its classpath).
		sub, err := sess.conn.Subscribe("/temp-queue/threatview.stats", stomp.AckAuto,
			stomp.SubscribeOpt.Header("transformation", "jms-map-xml"))
		if err != nil {
			sess.close(r.cfg.CloseTimeout)
			return s, fmt.Errorf("subscribe for statistics: %w: %w", ErrUnavailable, err)
		}
		r.sess, r.sub = sess, sub
	}
	broker, err := r.ask(ctx, "/queue/ActiveMQ.Statistics.Broker")
	if err != nil {
		r.reset()
		return s, err
	}
	queue, err := r.ask(ctx, "/queue/ActiveMQ.Statistics.Destination."+r.queue)
	if err != nil {
		r.reset()
		return s, err
	}
	s.StorePercent, s.StoreBytes, s.StoreLimit = broker["storePercentUsage"], broker["storeUsage"], broker["storeLimit"]
	s.MemoryPercent = broker["memoryPercentUsage"]
	s.QueueSize, s.Enqueued, s.Dequeued = queue["size"], queue["enqueueCount"], queue["dequeueCount"]
	s.QueueMemPct = queue["memoryPercentUsage"]
	return s, nil
}

// ask sends one statistics request and waits for its answer, skipping
// answers to earlier requests that came too late.
func (r *StatsReader) ask(ctx context.Context, dest string) (map[string]float64, error) {
	r.seq++
	id := "stats-" + strconv.Itoa(r.seq)
	err := withTimeout(r.cfg.ReceiptTimeout, func() error {
		return r.sess.conn.Send(dest, "text/plain", nil,
			stomp.SendOpt.Header("reply-to", "/temp-queue/threatview.stats"),
			stomp.SendOpt.Header("correlation-id", id),
			stomp.SendOpt.Header("persistent", "false"))
	})
	if err != nil {
		return nil, fmt.Errorf("statistics request: %w: %w", ErrUnavailable, err)
	}
	deadline := time.NewTimer(r.cfg.ReceiptTimeout)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("%s: %w", dest, ErrNoStatistics)
		case m, ok := <-r.sub.C:
			if !ok || m.Err != nil {
				return nil, fmt.Errorf("statistics subscription: %w", ErrUnavailable)
			}
			if m.Header.Get("correlation-id") != id {
				continue
			}
			return parseMapXML(m.Body)
		}
	}
}

// parseMapXML reads the broker's jms-map-xml form of a MapMessage
// (XStream's map: <map><entry><string>size</string><long>3</long></entry>...),
// keeping the numeric entries.
func parseMapXML(b []byte) (map[string]float64, error) {
	var doc struct {
		Entries []struct {
			Values []struct {
				XMLName xml.Name
				Text    string `xml:",chardata"`
			} `xml:",any"`
		} `xml:"entry"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("statistics answer: %w", err)
	}
	out := map[string]float64{}
	for _, e := range doc.Entries {
		if len(e.Values) != 2 || e.Values[0].XMLName.Local != "string" {
			continue
		}
		switch e.Values[1].XMLName.Local {
		case "long", "int", "double", "float", "short":
			if f, err := strconv.ParseFloat(strings.TrimSpace(e.Values[1].Text), 64); err == nil {
				out[strings.TrimSpace(e.Values[0].Text)] = f
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("statistics answer without numbers: %.200q", b)
	}
	return out, nil
}

// StatsExporter reads BrokerStats every interval and exports them as
// gauges, with the age of the queue's oldest message worked out from the
// enqueue and dequeue counters (the plugin does not give it): the queue is
// first in, first out, so its oldest message is message number dequeued+1,
// which arrived after the last reading whose enqueued count was at most
// dequeued. Messages already on the queue when the exporter first read it
// (or when the broker restarted) count from that first reading, so their
// age is a lower bound.
type StatsExporter struct {
	r        *StatsReader
	interval time.Duration
	log      *slog.Logger

	up, store, storeBytes, storeLimit, memory, size, queueMem, oldest prometheus.Gauge

	// readings: (time, enqueued + base) while the queue is not empty.
	readings []reading
	base     float64 // messages on the queue that the enqueue counter did not see arrive
	lastEnq  float64
}

type reading struct {
	at       time.Time
	enqueued float64
}

// NewStatsExporter registers the broker_* gauges on reg. queue labels them.
func NewStatsExporter(r *StatsReader, interval time.Duration, reg prometheus.Registerer, log *slog.Logger) *StatsExporter {
	if interval <= 0 {
		interval = 15 * time.Second
	}
	q := prometheus.Labels{"queue": r.queue}
	e := &StatsExporter{
		r: r, interval: interval, log: log,
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_stats_up",
			Help: "1 if the last read of the broker's statistics plugin answered."}),
		store: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_store_percent_usage",
			Help: "The broker's persistent store in use, percent of its storeUsage limit."}),
		storeBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_store_usage_bytes",
			Help: "The broker's persistent store in use, bytes."}),
		storeLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_store_limit_bytes",
			Help: "The broker's storeUsage limit, bytes."}),
		memory: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_memory_percent_usage",
			Help: "The broker's memoryUsage in use, percent of its limit."}),
		size: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_queue_size", ConstLabels: q,
			Help: "Messages on the queue (not yet acknowledged)."}),
		queueMem: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_queue_memory_percent_usage", ConstLabels: q,
			Help: "The queue's memory in use, percent of its memoryLimit."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "broker_queue_oldest_message_age_seconds", ConstLabels: q,
			Help: "Age of the queue's oldest message (0 when empty; a lower bound for messages older than the exporter)."}),
	}
	reg.MustRegister(e.up, e.store, e.storeBytes, e.storeLimit, e.memory, e.size, e.queueMem, e.oldest)
	return e
}

// Run reads until ctx ends.
func (e *StatsExporter) Run(ctx context.Context) {
	defer e.r.Close()
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		e.once(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *StatsExporter) once(ctx context.Context, now time.Time) {
	rctx, cancel := context.WithTimeout(ctx, 2*e.r.cfg.ReceiptTimeout)
	defer cancel()
	s, err := e.r.Read(rctx)
	if err != nil {
		e.up.Set(0)
		if ctx.Err() == nil {
			e.log.Warn("broker statistics", "err", err)
		}
		return
	}
	e.up.Set(1)
	e.store.Set(s.StorePercent)
	e.storeBytes.Set(s.StoreBytes)
	e.storeLimit.Set(s.StoreLimit)
	e.memory.Set(s.MemoryPercent)
	e.size.Set(s.QueueSize)
	e.queueMem.Set(s.QueueMemPct)
	e.oldest.Set(e.observe(now, s).Seconds())
}

// observe records a reading and returns the oldest message's age.
func (e *StatsExporter) observe(now time.Time, s BrokerStats) time.Duration {
	if s.Enqueued < e.lastEnq {
		// The broker restarted (its counters start at 0): what is on the
		// queue now counts from now.
		e.readings = e.readings[:0]
	}
	e.lastEnq = s.Enqueued
	// Messages on the queue that no counter saw arrive (found at the first
	// reading, or recovered from the store by a restarted broker).
	e.base = s.QueueSize + s.Dequeued - s.Enqueued
	if s.QueueSize <= 0 {
		e.readings = e.readings[:0]
		return 0
	}
	total := s.Enqueued + e.base
	if n := len(e.readings); n == 0 || e.readings[n-1].enqueued < total {
		e.readings = append(e.readings, reading{now, total})
	}
	// The oldest message is number Dequeued+1: it arrived by the first
	// reading whose count passed Dequeued.
	i := 0
	for i < len(e.readings) && e.readings[i].enqueued <= s.Dequeued {
		i++
	}
	if i >= len(e.readings) {
		return 0
	}
	// Readings before i are behind the consumer: drop them.
	e.readings = append(e.readings[:0], e.readings[i:]...)
	return now.Sub(e.readings[0].at)
}
