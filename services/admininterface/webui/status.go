package webui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"threatview/admininterface/broker"
	"threatview/admininterface/upstream"
	"threatview/platform/wire"
)

// Sampler reads the collector's counters at a fixed interval and keeps an
// hour of per-second rates, for the status page's "last hour". Each replica
// samples on its own from when it started; with several collector replicas
// behind one Service address each scrape sees one of them.
type Sampler struct {
	collector *upstream.Client
	interval  time.Duration
	window    time.Duration

	mu     sync.Mutex
	last   *counters
	points []RatePoint
}

// RatePoint is the rates over one sampling interval ending at T.
type RatePoint struct {
	T              time.Time
	EventsPerSec   float64
	RequestsPerSec float64
}

type counters struct {
	t                time.Time
	events, requests float64
}

// NewSampler returns a Sampler of the collector's /metrics.
func NewSampler(collector *upstream.Client, interval time.Duration) *Sampler {
	return &Sampler{collector: collector, interval: interval, window: time.Hour}
}

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) sample(ctx context.Context) {
	m, err := s.collector.Metrics(ctx)
	if err != nil {
		return // a gap in the chart says it
	}
	events, _ := upstream.Sum(m, "collector_events_accepted_total", nil)
	requests, _ := upstream.Sum(m, "collector_http_requests_total", map[string]string{"route": "/v1/events"})
	s.add(counters{t: time.Now(), events: events, requests: requests})
}

func (s *Sampler) add(c counters) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil {
		dt := c.t.Sub(s.last.t).Seconds()
		if dt > 0 {
			s.points = append(s.points, RatePoint{T: c.t,
				EventsPerSec: delta(s.last.events, c.events) / dt, RequestsPerSec: delta(s.last.requests, c.requests) / dt})
		}
	}
	s.last = &c
	cut := 0
	for cut < len(s.points) && c.t.Sub(s.points[cut].T) > s.window {
		cut++
	}
	s.points = append([]RatePoint(nil), s.points[cut:]...)
}

// delta is a counter's increase; a smaller value means the process
// restarted and counted from zero.
func delta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// Points returns the rates of the last hour, oldest first.
func (s *Sampler) Points() []RatePoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RatePoint(nil), s.points...)
}

type serviceRow struct {
	Name, Version, Detail string
	Ready                 bool
	Latency               string
}

type queueRow struct {
	Name      string
	Depth     int
	Capped    bool
	Consumers string
	Err       string
}

// Backlog thresholds: the chart's alert thresholds by default
// (charts/threatview values: thresholds), so the page turns amber when
// the alert would be about to fire.
const (
	warnQueueMessages   = 20000
	warnQueueAgeSeconds = 600
	warnStorePercent    = 70
	warnLagSeconds      = 300
)

// backlogRow is one figure of the status page's backlog table.
type backlogRow struct {
	Name, Value, Limit, Source string
	Warn, Unknown              bool
}

type statusData struct {
	At                     time.Time
	Backlog                []backlogRow
	BacklogWarn            bool
	Services               []serviceRow
	Queues                 []queueRow
	DepthCap               int
	BrowseLimit            int
	Lag                    string
	EventsNow, RequestsNow float64
	Points                 []RatePoint
	Chart                  template.HTML
	Interval               time.Duration
}

func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := statusData{At: s.now(), DepthCap: s.opts.DepthCap, BrowseLimit: min(s.opts.DepthCap, broker.BrowseLimit),
		Lag: "unknown (processor metrics not read)"}
	rows := make([]serviceRow, len(s.opts.Targets))
	metrics := make([][]upstream.Sample, len(s.opts.Targets))
	var wg sync.WaitGroup
	for i, t := range s.opts.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd := t.Client.Probe(ctx)
			row := serviceRow{Name: t.Name, Ready: rd.Ready, Latency: rd.Latency.Round(time.Millisecond).String(), Detail: rd.Err}
			for dep, e := range rd.Failed {
				row.Detail += dep + ": " + e + "; "
			}
			if m, err := t.Client.Metrics(ctx); err == nil {
				metrics[i] = m
				row.Version = upstream.Version(m)
			}
			rows[i] = row
		}()
	}
	wg.Wait()
	d.Services = rows

	consumers := func(metric string) string {
		n, found := 0.0, false
		for _, m := range metrics {
			if v, ok := upstream.Sum(m, metric, nil); ok {
				n += v
				found = true
			}
		}
		if !found {
			return "unknown"
		}
		return fmt.Sprintf("%.0f", n)
	}
	for _, m := range metrics {
		if v, ok := upstream.Sum(m, "processor_aggregation_lag_seconds", nil); ok {
			d.Lag = (time.Duration(v * float64(time.Second))).Round(time.Millisecond).String()
		}
	}
	d.Backlog = backlog(metrics, s.opts.EventsQueues)
	for _, b := range d.Backlog {
		d.BacklogWarn = d.BacklogWarn || b.Warn
	}
	// processor_leader is 1 on each shard's leader: with shards, the
	// first events queue's row shows the leaders of all of them.
	leaders := consumers("processor_leader")
	if n := len(s.opts.EventsQueues); n > 1 {
		leaders += fmt.Sprintf(" (all %d shards)", n)
	}
	var queues []struct{ dest, consumers string }
	for i, q := range s.opts.EventsQueues {
		c := leaders
		if i > 0 {
			c = "see above"
		}
		queues = append(queues, struct{ dest, consumers string }{q, c}, struct{ dest, consumers string }{wire.DeadLetter(q), "0"})
	}
	queues = append(queues, struct{ dest, consumers string }{wire.AuditQueue, consumers("auditworker_leader")},
		struct{ dest, consumers string }{wire.DeadLetter(wire.AuditQueue), "0"})
	d.Queues = make([]queueRow, len(queues))
	for i, q := range queues {
		row := queueRow{Name: strings.TrimPrefix(q.dest, "/queue/"), Consumers: q.consumers}
		msgs, complete, err := s.deps.Broker.Browse(ctx, q.dest, s.opts.DepthCap, false)
		if err != nil {
			row.Err = "broker did not answer"
			s.log.Warn("queue depth", "queue", q.dest, "err", err)
		}
		row.Depth, row.Capped = len(msgs), !complete
		d.Queues[i] = row
	}
	if s.deps.Sampler != nil {
		d.Points = s.deps.Sampler.Points()
		d.Interval = s.deps.Sampler.interval
		if n := len(d.Points); n > 0 {
			d.EventsNow, d.RequestsNow = d.Points[n-1].EventsPerSec, d.Points[n-1].RequestsPerSec
		}
		d.Chart = rateChart(d.Points, s.now())
	}
	s.render(w, r, http.StatusOK, "status", "System status", d, "", "")
}

// backlog reads the events queue's depth and oldest message age and the
// broker's store usage (the collector's broker_* gauges) and the
// processor's aggregation lag from the services' metrics. Several replicas
// export the same gauge: the largest value counts, as in the alerts.
func backlog(metrics [][]upstream.Sample, eventsQueues []string) []backlogRow {
	largest := func(name string, match map[string]string) (float64, bool) {
		top, found := 0.0, false
		for _, m := range metrics {
			if v, ok := upstream.Sum(m, name, match); ok {
				top, found = max(top, v), true
			}
		}
		return top, found
	}
	brokerUp, _ := largest("broker_stats_up", nil)
	row := func(name, metric string, match map[string]string, limit float64, format func(float64) string) backlogRow {
		r := backlogRow{Name: name, Source: metric, Limit: format(limit)}
		v, ok := largest(metric, match)
		if !ok || (strings.HasPrefix(metric, "broker_") && brokerUp < 1) {
			r.Unknown, r.Value = true, "unknown"
			return r
		}
		r.Value, r.Warn = format(v), v >= limit
		return r
	}
	count := func(v float64) string { return fmt.Sprintf("%.0f messages", v) }
	secs := func(v float64) string { return time.Duration(v * float64(time.Second)).Round(time.Second).String() }
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", v) }
	var rows []backlogRow
	for _, queue := range eventsQueues {
		name := strings.TrimPrefix(queue, "/queue/")
		q, on := map[string]string{"queue": name}, ""
		if len(eventsQueues) > 1 {
			on = " (" + name + ")"
		}
		rows = append(rows,
			row("Events queue depth"+on, "broker_queue_size", q, warnQueueMessages, count),
			row("Oldest message on the events queue"+on, "broker_queue_oldest_message_age_seconds", q, warnQueueAgeSeconds, secs))
	}
	return append(rows,
		row("Broker store in use", "broker_store_percent_usage", nil, warnStorePercent, pct),
		row("Aggregation lag", "processor_aggregation_lag_seconds", nil, warnLagSeconds, secs))
}

// rateChart draws the last hour's rates as an inline SVG (presentation
// attributes only, so the CSP needs no inline style).
func rateChart(points []RatePoint, now time.Time) template.HTML {
	const W, H, pad = 720.0, 180.0, 30.0
	top := 1.0
	for _, p := range points {
		top = max(top, p.EventsPerSec, p.RequestsPerSec)
	}
	x := func(t time.Time) float64 { return pad + (W-2*pad)*(1-now.Sub(t).Seconds()/3600) }
	y := func(v float64) float64 { return H - pad - (H-2*pad)*v/top }
	line := func(get func(RatePoint) float64) string {
		var b strings.Builder
		for _, p := range points {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(p.T), y(get(p)))
		}
		return b.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="Events and requests per second over the last hour">`, W, H, W, H)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#57606a"/>`, pad, H-pad, W-pad, H-pad)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#57606a"/>`, pad, pad, pad, H-pad)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" fill="#57606a">%.1f/s</text>`, pad+4, pad-8, top)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" fill="#57606a">−60 min</text>`, pad, H-8)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" fill="#57606a" text-anchor="end">now</text>`, W-pad, H-8)
	if len(points) > 0 {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#9ecbff" stroke-width="2" points="%s"/>`, line(func(p RatePoint) float64 { return p.RequestsPerSec }))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#0a3069" stroke-width="2" points="%s"/>`, line(func(p RatePoint) float64 { return p.EventsPerSec }))
	} else {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="13" fill="#57606a" text-anchor="middle">no samples yet</text>`, W/2, H/2)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built only from numbers and constants above
}
