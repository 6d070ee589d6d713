package privacy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/pglock"
	"threatview/retention"
)

// RunnerConfig bounds the job.
type RunnerConfig struct {
	// BatchRows is the most events one transaction deletes.
	BatchRows int
	// Settle is how long the job waits after suppressing before it deletes:
	// at least two of the processor's PROCESSOR_SUPPRESSION_REFRESH, so no
	// event of the subject is stored after the deletion.
	Settle time.Duration
	// Poll is how often the runner looks for queued erasures, and the
	// first backoff of an erasure whose try failed for a transient reason
	// (doubled each try, at most MaxBackoff).
	Poll time.Duration
	// MaxBackoff bounds the wait between two tries of one erasure
	// (default 5 minutes).
	MaxBackoff time.Duration
	// MaxAttempts is how many tries an erasure gets before it fails with
	// its last error as the reason (default 20: about an hour and a half
	// of an unreachable database with the defaults).
	MaxAttempts int
}

// backoff returns the wait after the attempts-th try failed.
func (c RunnerConfig) backoff(attempts int) time.Duration {
	max := c.MaxBackoff
	if max <= 0 {
		max = 5 * time.Minute
	}
	d := c.Poll
	for i := 1; i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

func (c RunnerConfig) maxAttempts() int {
	if c.MaxAttempts <= 0 {
		return 20
	}
	return c.MaxAttempts
}

// Metrics are the runner's metrics (prefix privacy_).
type Metrics struct {
	Erasures *prometheus.CounterVec // by final status and result
	Rows     *prometheus.CounterVec // by store
	Running  prometheus.Gauge
	// Retries counts tries that failed for a transient reason.
	Retries prometheus.Counter
	// Open, Retrying and OldestOpen describe the open erasures (the lock
	// holder's view, refreshed every poll).
	Open, Retrying, OldestOpen prometheus.Gauge
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Erasures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "privacy_erasures_total",
			Help: "Erasures finished, by status (done, failed) and, when done, result (erased, nothing_matched)."}, []string{"status", "result"}),
		Rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "privacy_erased_rows_total",
			Help: "Rows erased, by store (events, facts, late_events, rollup_rows, device_days, daily_users, audit_bodies, archive_rows)."}, []string{"store"}),
		Running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "privacy_erasure_running",
			Help: "1 while this process runs an erasure."}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "privacy_erasure_retries_total",
			Help: "Erasure tries that failed for a transient reason (retried after a backoff)."}),
		Open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "privacy_erasures_open",
			Help: "Erasures queued or running (set by the runner holding the lock)."}),
		Retrying: prometheus.NewGauge(prometheus.GaugeOpts{Name: "privacy_erasures_retrying",
			Help: "Open erasures waiting out a backoff after a failed try (set by the runner holding the lock)."}),
		OldestOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "privacy_erasure_oldest_open_seconds",
			Help: "Age of the oldest queued or running erasure, 0 with none (set by the runner holding the lock)."}),
	}
	reg.MustRegister(m.Erasures, m.Rows, m.Running, m.Retries, m.Open, m.Retrying, m.OldestOpen)
	return m
}

// Runner runs queued erasures one at a time. Only the holder of a
// Postgres advisory lock runs (one runner however many replicas).
type Runner struct {
	pg      *PG
	audit   Redactor
	cfg     RunnerConfig
	metrics *Metrics
	log     *slog.Logger
	notify  chan struct{}
	// archives, when set, rewrites archived months without the subject.
	archives *ArchiveRewriter
}

// NewRunner returns a runner.
func NewRunner(pg *PG, audit Redactor, cfg RunnerConfig, m *Metrics, log *slog.Logger) *Runner {
	return &Runner{pg: pg, audit: audit, cfg: cfg, metrics: m, log: log, notify: make(chan struct{}, 1)}
}

// WithArchives makes every erasure also rewrite the archived months that
// hold the subject (see ArchiveRewriter); it returns r.
func (r *Runner) WithArchives(w *ArchiveRewriter) *Runner {
	r.archives = w
	return r
}

// Wake makes the runner look for work now.
func (r *Runner) Wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// runnerLock is the advisory lock key of the erasure runner.
const runnerLock = 0x7072697661637931 // "privacy1"

// Run runs erasures until ctx ends, while it holds the runner lock: a
// platform/pglock advisory lock on a connection of its own (with pool's
// settings), checked every Poll. When the lock is lost (its session ended
// or stalled), the erasure in hand is cut short (it stays running and is
// taken up again) and the runner waits for the lock again.
func (r *Runner) Run(ctx context.Context, pool *pgxpool.Pool) error {
	leader := pglock.NewLeader(pglock.Config{Name: "erasure runner lock", ConnConfig: pool.Config().ConnConfig,
		Key: runnerLock, Poll: r.cfg.Poll}, nil, r.log)
	for ctx.Err() == nil {
		if err := leader.Run(ctx, r.loop); err != nil && ctx.Err() == nil {
			r.log.Warn("erasure runner paused", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(r.cfg.Poll):
			}
		}
	}
	return nil
}

func (r *Runner) loop(ctx context.Context) error {
	for ctx.Err() == nil {
		if n, err := r.pg.SweepPending(ctx); err != nil {
			return err
		} else if n > 0 {
			r.log.Warn("unaudited erasure requests removed", "count", n)
		}
		o, err := r.pg.OpenStats(ctx)
		if err != nil {
			return err
		}
		r.metrics.Open.Set(float64(o.Count))
		r.metrics.Retrying.Set(float64(o.Retrying))
		r.metrics.OldestOpen.Set(o.OldestSeconds)
		e, err := r.pg.Claim(ctx)
		if err != nil {
			return err
		}
		if e == nil {
			select {
			case <-ctx.Done():
			case <-r.notify:
			case <-time.After(r.cfg.Poll):
			}
			continue
		}
		r.run(ctx, e)
	}
	return nil
}

// run performs one erasure and records its outcome. A job cut short by
// ctx stays running and is taken up again by the next runner.
func (r *Runner) run(ctx context.Context, e *Erasure) {
	r.metrics.Running.Set(1)
	defer r.metrics.Running.Set(0)
	start := time.Now()
	log := r.log.With("erasure_id", e.ID, "app_id", e.AppID)
	log.Info("erasure started", "attempt", e.Attempts)
	rep, err := r.erase(ctx, e)
	if ctx.Err() != nil {
		log.Info("erasure interrupted; it resumes on the next start")
		return
	}
	rep.Seconds += time.Since(start).Seconds()
	e.Report = rep
	if errors.Is(err, ErrUnavailable) && !Permanent(err) && e.Attempts < r.cfg.maxAttempts() {
		// A database or the audit DB away (a stall, a restart) is not the
		// erasure's failure: it stays running, with what it did so far,
		// and is taken up again from its start (every step repeats
		// safely) after a backoff of its own; the others go first.
		delay := r.cfg.backoff(e.Attempts)
		e.Error = err.Error()
		r.metrics.Retries.Inc()
		log.Warn("erasure paused; it is retried", "err", err, "attempt", e.Attempts, "retry_in", delay.String())
		if err := r.pg.Retry(context.WithoutCancel(ctx), e, delay); err != nil {
			log.Error("erasure retry not recorded", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(r.cfg.Poll):
			}
		}
		return
	}
	e.Status, e.Error = StatusDone, ""
	switch {
	case err == nil:
		log.Info("erasure done", "result", rep.Result, "events", rep.Events, "late_events", rep.LateEvents, "audit_bodies", rep.AuditBodies, "seconds", rep.Seconds)
	case errors.Is(err, ErrUnavailable) && !Permanent(err):
		e.Status, e.Error = StatusFailed, fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, err)
		log.Error("erasure failed", "err", err, "attempts", e.Attempts)
	default:
		e.Status, e.Error = StatusFailed, err.Error()
		log.Error("erasure failed", "err", err, "attempts", e.Attempts)
	}
	if err := r.pg.Finish(context.WithoutCancel(ctx), e); err != nil {
		log.Error("erasure outcome not recorded; it runs again", "err", err)
		return
	}
	r.metrics.Erasures.WithLabelValues(e.Status, rep.Result).Inc()
}

// erase runs one try of e. The report starts from what earlier tries
// did, so the counts of an erasure retried after a part of it was done
// still say what it erased.
func (r *Runner) erase(ctx context.Context, e *Erasure) (Report, error) {
	rep := e.Report
	rep.Suppressed, rep.Result, rep.Verification = e.Suppress, "", nil
	device := e.DeviceID != ""
	if device {
		// Suppressed while the job runs, whatever the request says: a device
		// still sending would otherwise race the deletion (and its facts the
		// rollup decrement). The processor suppresses devices only: a user
		// erasure has no suppression (docs/privacy.md).
		since, err := r.pg.Suppress(ctx, e)
		if err != nil {
			return rep, err
		}
		// Settle counts from when the suppression began (on the database's
		// clock), so the erasures queued together wait once.
		var now time.Time
		if err := r.pg.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return rep, unavailable("clock", err)
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(r.cfg.Settle - now.Sub(since)):
		}
	}
	// A user erasure runs for each pseudonym of the user (one per key), so
	// events stored under an older key go too.
	v := Verification{}
	for _, s := range e.Subjects() {
		if err := r.eraseSubject(ctx, e.ID, s, &rep); err != nil {
			return rep, err
		}
	}
	months, err := r.pg.ArchivedMonths(ctx)
	if err != nil {
		return rep, err
	}
	rep.ArchivedMonths = months
	for _, s := range e.Subjects() {
		sv, err := r.pg.Verify(ctx, s)
		if err != nil {
			return rep, err
		}
		if r.audit != nil {
			if sv.AuditBodies, err = r.audit.Remaining(ctx, s); err != nil {
				return rep, err
			}
		}
		v.Events += sv.Events
		v.LateEvents += sv.LateEvents
		v.DeviceDays += sv.DeviceDays
		v.DailyUsers += sv.DailyUsers
		v.AuditBodies += sv.AuditBodies
	}
	v.Clean = v.Events == 0 && v.LateEvents == 0 && v.DeviceDays == 0 && v.DailyUsers == 0 && v.AuditBodies == 0
	rep.Verification = &v
	if !v.Clean {
		return rep, fmt.Errorf("verification found the subject left: %+v", v)
	}
	rep.Result = ResultErased
	if rep.Events == 0 && rep.LateEvents == 0 && rep.DeviceDays == 0 && rep.DailyUsers == 0 && rep.AuditBodies == 0 &&
		!rewroteAny(rep.ArchivesRewritten) {
		// Clean, but because there was nothing: say so, a mistyped id
		// must not read as a successful erasure.
		rep.Result = ResultNothingMatched
	}
	if device && !e.Suppress {
		if err := r.pg.lift(ctx, e.Subject(), "erasure "+e.ID, e.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return rep, err
		}
	}
	return rep, nil
}

// eraseSubject erases one subject (a device, or one pseudonym of a user)
// from every store and adds what it did to rep.
func (r *Runner) eraseSubject(ctx context.Context, id string, s Subject, rep *Report) error {
	for {
		b, err := r.pg.EraseEvents(ctx, s, r.cfg.BatchRows)
		if err != nil {
			return err
		}
		if b.Events == 0 {
			break
		}
		if b.Facts != b.Events {
			// An event without its fact (or a fact twice) would leave a
			// rollup off; the transaction has committed, so say so.
			return fmt.Errorf("batch deleted %d events but %d facts", b.Events, b.Facts)
		}
		rep.Batches++
		rep.Events += b.Events
		rep.Facts += b.Facts
		rep.RollupRows += b.RollupRows
		rep.RollupRowsRemoved += b.RollupRowsRemoved
		rep.DeviceDays += b.DeviceDays
		rep.DailyUsers += b.DailyUsers
		r.metrics.Rows.WithLabelValues("events").Add(float64(b.Events))
		r.metrics.Rows.WithLabelValues("facts").Add(float64(b.Facts))
		r.metrics.Rows.WithLabelValues("rollup_rows").Add(float64(b.RollupRows))
		r.metrics.Rows.WithLabelValues("device_days").Add(float64(b.DeviceDays))
		r.metrics.Rows.WithLabelValues("daily_users").Add(float64(b.DailyUsers))
	}
	for {
		n, err := r.pg.EraseLate(ctx, s, r.cfg.BatchRows)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		rep.LateEvents += n
		r.metrics.Rows.WithLabelValues("late_events").Add(float64(n))
	}
	n, err := r.pg.EraseDeviceDays(ctx, s)
	if err != nil {
		return err
	}
	rep.DeviceDays += n
	r.metrics.Rows.WithLabelValues("device_days").Add(float64(n))
	if n, err = r.pg.EraseDailyUsers(ctx, s); err != nil {
		return err
	}
	rep.DailyUsers += n
	r.metrics.Rows.WithLabelValues("daily_users").Add(float64(n))
	if r.audit != nil {
		for {
			n, err := r.audit.RedactBatch(ctx, s, 500)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			rep.AuditBodies += n
			r.metrics.Rows.WithLabelValues("audit_bodies").Add(float64(n))
		}
	}
	if r.archives != nil {
		rw, err := r.archives.Rewrite(ctx, id, s)
		rep.ArchivesRewritten = append(rep.ArchivesRewritten, rw...)
		if rep.ArchivesRewritten == nil {
			rep.ArchivesRewritten = []retention.Rewritten{}
		}
		for _, a := range rw {
			rep.RollupRows += a.RollupRows
		}
		r.metrics.Rows.WithLabelValues("archive_rows").Add(float64(archiveRows(rw)))
		if err != nil {
			return err
		}
	}
	return nil
}

func rewroteAny(rw []retention.Rewritten) bool {
	for _, a := range rw {
		if a.RowsRemoved > 0 || a.RowsRedacted > 0 {
			return true
		}
	}
	return false
}

func archiveRows(rw []retention.Rewritten) (n int64) {
	for _, a := range rw {
		n += a.RowsRemoved
	}
	return n
}
