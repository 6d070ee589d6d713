// Package evaluate is the active replica's alert loop: fold the outbox into
// minute counts, measure each rule, record transitions (with hysteresis and
// silences) and send their notifications, at most once each as far as we
// know, and never one transition twice across restarts or leaders.
package evaluate

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/alerts"
	"threatview/alerts/postgres"
	"threatview/platform/pipeline"
)

// Store is what the loop needs of the database (postgres.Store).
type Store interface {
	Fold(ctx context.Context, limit int) (int, error)
	Values(ctx context.Context, now time.Time) ([]postgres.Value, error)
	Transition(ctx context.Context, r alerts.Rule, from string, t *alerts.Transition, body []byte) (bool, error)
	Due(ctx context.Context, limit int, lease time.Duration) ([]postgres.Pending, error)
	Sent(ctx context.Context, transitionID int64) error
	Retry(ctx context.Context, transitionID int64, next time.Time, dead bool, msg string) error
	Prune(ctx context.Context, keep, counts time.Duration) (int64, error)
}

// Sender delivers one notification (notify.Sender).
type Sender interface {
	Send(ctx context.Context, ch alerts.Channel, deliveryID string, body []byte) error
}

// Config tunes the loop.
type Config struct {
	Every       time.Duration // evaluation period (at most 30 s)
	Attempts    int           // delivery attempts before a dead letter
	Backoff     pipeline.Backoff
	OutboxKeep  time.Duration // outbox rows every cursor passed are kept this long
	CountsKeep  time.Duration // minute counts are kept this long (8 days for baselines)
	SendTimeout time.Duration
}

// Metrics are the loop's series.
type Metrics struct {
	Evaluations   prometheus.Counter
	Transitions   *prometheus.CounterVec
	Notifications *prometheus.CounterVec
	Folded        prometheus.Counter
	LastRun       prometheus.Gauge
}

// NewMetrics registers the loop's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Evaluations: prometheus.NewCounter(prometheus.CounterOpts{Name: "alerts_evaluations_total", Help: "Evaluation rounds run."}),
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "alerts_transitions_total",
			Help: "Rule transitions recorded, by state."}, []string{"state"}),
		Notifications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "alerts_notifications_total",
			Help: "Notification attempts, by outcome (sent, retry, dead)."}, []string{"outcome"}),
		Folded:  prometheus.NewCounter(prometheus.CounterOpts{Name: "alerts_outbox_folded_total", Help: "Outbox rows folded into the minute counts."}),
		LastRun: prometheus.NewGauge(prometheus.GaugeOpts{Name: "alerts_last_evaluation_timestamp_seconds", Help: "When the last evaluation round ended."}),
	}
	reg.MustRegister(m.Evaluations, m.Transitions, m.Notifications, m.Folded, m.LastRun)
	return m
}

// Loop is the evaluator.
type Loop struct {
	st  Store
	snd Sender
	cfg Config
	m   *Metrics
	log *slog.Logger
	now func() time.Time
}

// New returns the loop.
func New(st Store, snd Sender, cfg Config, m *Metrics, log *slog.Logger) *Loop {
	if cfg.Attempts <= 0 {
		cfg.Attempts = 8
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	return &Loop{st: st, snd: snd, cfg: cfg, m: m, log: log, now: time.Now}
}

// Run evaluates every cfg.Every until ctx ends (the leader's work).
func (l *Loop) Run(ctx context.Context) error {
	lastPrune := time.Time{}
	pipeline.Every(ctx, l.cfg.Every, func() {
		if ctx.Err() != nil {
			return
		}
		l.Round(ctx)
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			if n, err := l.st.Prune(ctx, l.cfg.OutboxKeep, l.cfg.CountsKeep); err != nil {
				l.log.Warn("prune failed", "err", err)
			} else if n > 0 {
				l.log.Info("outbox pruned", "rows", n)
			}
		}
	})
	return nil
}

// Round folds, evaluates and sends once.
func (l *Loop) Round(ctx context.Context) {
	for {
		n, err := l.st.Fold(ctx, 5000)
		if err != nil {
			l.log.Warn("fold outbox failed", "err", err)
			break
		}
		l.m.Folded.Add(float64(n))
		if n < 5000 {
			break
		}
	}
	now := l.now().UTC()
	values, err := l.st.Values(ctx, now)
	if err != nil {
		l.log.Warn("measure rules failed", "err", err)
	}
	for _, v := range values {
		l.evaluate(ctx, v, now)
	}
	l.send(ctx)
	l.m.Evaluations.Inc()
	l.m.LastRun.SetToCurrentTime()
}

// Threshold is the rule's effective threshold: its own, and for a
// baseline rule at least factor times the baseline.
func Threshold(v postgres.Value) int64 {
	t := v.Rule.Threshold
	if v.Rule.Kind == alerts.KindBaseline {
		t = max(t, int64(math.Ceil(v.Rule.Factor*v.Baseline)))
	}
	return t
}

// Next is the state machine: ok fires at the threshold, firing resolves at
// alerts.ResolveAt(threshold) or below. It returns the transition's state
// ("firing" or "resolved"), or "" for none.
func Next(state string, value, threshold int64) string {
	switch {
	case state != "firing" && value >= threshold:
		return "firing"
	case state == "firing" && value <= alerts.ResolveAt(threshold):
		return "resolved"
	}
	return ""
}

func (l *Loop) evaluate(ctx context.Context, v postgres.Value, now time.Time) {
	r := v.Rule
	th := Threshold(v)
	to := Next(r.State, v.Value, th)
	if to == "" {
		return
	}
	t := &alerts.Transition{RuleID: r.ID, State: to, Value: v.Value, Threshold: th, At: now,
		Silenced: r.SilencedUntil != nil && r.SilencedUntil.After(now)}
	body, _ := json.Marshal(alerts.Notification{RuleID: r.ID, Name: r.Name, State: to, Value: v.Value,
		Threshold: th, WindowSeconds: r.WindowSeconds, AppID: r.AppID, Threat: r.Threat, Country: r.Country, OS: r.OS,
		At: now})
	ok, err := l.st.Transition(ctx, r, r.State, t, body)
	if err != nil {
		l.log.Warn("record transition failed", "rule", r.ID, "err", err)
		return
	}
	if ok {
		l.m.Transitions.WithLabelValues(to).Inc()
		l.log.Info("rule transition", "rule", r.ID, "state", to, "value", v.Value, "threshold", th, "silenced", t.Silenced)
	}
}

func (l *Loop) send(ctx context.Context) {
	// One claim at a time, each leased for one send: a notification a
	// dead sender had claimed is tried again within SendTimeout + 5 s.
	for range 20 {
		one, err := l.st.Due(ctx, 1, l.cfg.SendTimeout+5*time.Second)
		if err != nil {
			l.log.Warn("read due notifications failed", "err", err)
			return
		}
		if len(one) == 0 {
			return
		}
		l.sendOne(ctx, one[0])
	}
}

func (l *Loop) sendOne(ctx context.Context, p postgres.Pending) {
	sctx, cancel := context.WithTimeout(ctx, l.cfg.SendTimeout)
	err := l.snd.Send(sctx, p.Rule.Channel, p.DeliveryID, p.Body)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		if err := l.st.Sent(ctx, p.TransitionID); err != nil {
			l.log.Warn("record notification sent failed", "transition", p.TransitionID, "err", err)
		}
		l.m.Notifications.WithLabelValues("sent").Inc()
		return
	}
	dead := p.Attempts+1 >= l.cfg.Attempts
	outcome := "retry"
	if dead {
		outcome = "dead"
	}
	l.m.Notifications.WithLabelValues(outcome).Inc()
	l.log.Warn("notification failed", "transition", p.TransitionID, "rule", p.Rule.ID, "attempt", p.Attempts+1, "dead", dead, "err", err)
	next := l.now().Add(l.cfg.Backoff.Wait(p.Attempts))
	if err := l.st.Retry(ctx, p.TransitionID, next, dead, err.Error()); err != nil {
		l.log.Warn("record notification failure failed", "transition", p.TransitionID, "err", err)
	}
}
