package privacy_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/privacy"
)

// lifecycle is a fresh events DB with a few events, their facts and
// rollups (fill: 40 events of app-0 and app-1, devices d-0..d-3, 5 each)
// and a runner over it.
type lifecycle struct {
	pool    *pgxpool.Pool
	db      *sql.DB
	pg      *privacy.PG
	metrics *privacy.Metrics
	log     *testenv.SyncBuffer
}

func newLifecycle(t *testing.T) *lifecycle {
	t.Helper()
	url, db := retentiontest.Postgres(t)
	fill(t, db, 40, 4)
	pool := open(t, url)
	return &lifecycle{pool: pool, db: db, pg: privacy.NewPG(pool), metrics: privacy.NewMetrics(prometheus.NewRegistry()), log: &testenv.SyncBuffer{}}
}

// run starts a runner (settle 0, polling every 20 ms) until the test ends.
func (l *lifecycle) run(t *testing.T, redactor privacy.Redactor, cfg privacy.RunnerConfig) {
	t.Helper()
	cfg.BatchRows = 100
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	r := privacy.NewRunner(l.pg, redactor, cfg, l.metrics, slog.New(slog.NewJSONHandler(l.log, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx, l.pool) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// queue stores and queues an erasure of s, as the API does once audited.
func (l *lifecycle) queue(t *testing.T, s privacy.Subject, suppress bool) *privacy.Erasure {
	t.Helper()
	e := &privacy.Erasure{ID: uuid.Must(uuid.NewV7()).String(), AppID: s.AppID, DeviceID: s.DeviceID, Suppress: suppress, RequestedBy: "test"}
	if err := l.pg.Create(context.Background(), e); err != nil {
		t.Fatalf("Create(%v) = %v", s, err)
	}
	if err := l.pg.Queue(context.Background(), e); err != nil {
		t.Fatalf("Queue(%v) = %v", s, err)
	}
	return e
}

// row reads an erasure's status, attempts and error straight from the table
// ("" when there is no row).
func (l *lifecycle) row(t *testing.T, id string) (status string, attempts int, reason string) {
	t.Helper()
	err := l.pool.QueryRow(context.Background(), `SELECT status, attempts, error FROM events.erasures WHERE id = $1`, id).Scan(&status, &attempts, &reason)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		t.Fatal(err)
	}
	return status, attempts, reason
}

// wait waits until the erasure's status is want and returns it.
func (l *lifecycle) wait(t *testing.T, id, want string, within time.Duration) *privacy.Erasure {
	t.Helper()
	testenv.MustPing(t, within, "erasure "+want, func() error {
		if st, n, reason := l.row(t, id); st != want {
			return fmt.Errorf("status %q after %d attempts (%s)", st, n, reason)
		}
		return nil
	})
	e, err := l.pg.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (l *lifecycle) count(t *testing.T, q string, args ...any) (n int64) {
	t.Helper()
	if err := l.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// slowAuditor takes hold before it answers err, and notes the status of
// the erasure its record names at the end of that time.
type slowAuditor struct {
	l    *lifecycle
	t    *testing.T
	hold time.Duration
	err  error
	seen []string
}

func (a *slowAuditor) Audit(_ context.Context, rec wire.AuditRecord) error {
	time.Sleep(a.hold)
	id := strings.TrimPrefix(rec.Resource, "/v1/erasures/")
	st, _, _ := a.l.row(a.t, id)
	a.seen = append(a.seen, st)
	return a.err
}

// TestAPI_ErasureAuditedBeforeItRuns: while a request's audit record is
// being written (slowly: 10 of the runner's polls), the erasure is stored
// but no runner takes it. When the audit fails the request is withdrawn
// having done nothing: no erasure row, the device's events still there, no
// suppression left. When it succeeds, the erasure runs after it. Before the
// fix the runner claimed the queued row within a poll and erased the
// device while the answer was still to be 503 "nothing was changed",
// leaving its suppression behind.
func TestAPI_ErasureAuditedBeforeItRuns(t *testing.T) {
	l := newLifecycle(t)
	l.run(t, nil, privacy.RunnerConfig{})
	log := slog.New(slog.DiscardHandler)
	audit := &slowAuditor{l: l, t: t, hold: 200 * time.Millisecond, err: errors.New("audit logger down")}
	h := privacy.NewAPI(l.pg, audit, nil, log).Handler(authz.New(nil, "admin-key", log), httpserver.NewRegistry(), nil, nil)
	post := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/erasures", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer admin-key")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	subject := func(dev string) int64 {
		return l.count(t, `SELECT count(*) FROM events.events WHERE app_id = 'app-1' AND device_id = $1`, dev)
	}
	before := subject("d-1")
	if before == 0 {
		t.Fatal("fixture: d-1 of app-1 has no event")
	}

	t.Run("AuditFails", func(t *testing.T) {
		w := post(`{"app_id":"app-1","device_id":"d-1","suppress":false}`)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("POST with the audit failing = %d %s, want 503", w.Code, w.Body)
		}
		time.Sleep(200 * time.Millisecond) // a runner that took it would be done by now
		if len(audit.seen) != 1 || audit.seen[0] != privacy.StatusPending {
			t.Errorf("status while being audited = %q, want [pending] (not claimable)", audit.seen)
		}
		if n := l.count(t, `SELECT count(*) FROM events.erasures`); n != 0 {
			t.Errorf("%d erasures stored after the withdrawal, want 0", n)
		}
		if n := subject("d-1"); n != before {
			t.Errorf("%d events of the device left, want %d: a withdrawn request erased it", n, before)
		}
		if n := l.count(t, `SELECT count(*) FROM events.suppressions WHERE lifted_at IS NULL`); n != 0 {
			t.Errorf("%d suppressions left by a withdrawn request, want 0", n)
		}
	})
	t.Run("AuditSucceeds", func(t *testing.T) {
		audit.err, audit.seen = nil, nil
		w := post(`{"app_id":"app-1","device_id":"d-1"}`)
		if w.Code != http.StatusAccepted {
			t.Fatalf("POST = %d %s, want 202", w.Code, w.Body)
		}
		if len(audit.seen) != 1 || audit.seen[0] != privacy.StatusPending {
			t.Errorf("status while being audited = %q, want [pending]", audit.seen)
		}
		id := strings.Split(strings.Split(w.Body.String(), `"id":"`)[1], `"`)[0]
		e := l.wait(t, id, privacy.StatusDone, 10*time.Second)
		if e.Report.Events != before || e.Report.Result != privacy.ResultErased {
			t.Errorf("report %+v, want %d events erased", e.Report, before)
		}
	})
}

// TestPG_WithdrawnLeavesNoSuppression: another job's suppression step
// (which suppresses every queued subject, so a queue waits once) does not
// suppress a request still being audited, so withdrawing it leaves no
// suppression. Before, the withdrawn subject stayed suppressed for good.
func TestPG_WithdrawnLeavesNoSuppression(t *testing.T) {
	l := newLifecycle(t)
	ctx := context.Background()
	a := l.queue(t, privacy.Subject{AppID: "app-1", DeviceID: "d-1"}, true)
	b := &privacy.Erasure{ID: uuid.Must(uuid.NewV7()).String(), AppID: "app-0", DeviceID: "d-2", Suppress: true, RequestedBy: "test"}
	if err := l.pg.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, err := l.pg.Claim(ctx); err != nil || got == nil || got.ID != a.ID {
		t.Fatalf("Claim = %v, %v; want the queued erasure, not the one being audited", got, err)
	}
	if _, err := l.pg.Suppress(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := l.pg.Delete(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if n := l.count(t, `SELECT count(*) FROM events.suppressions WHERE lifted_at IS NULL AND device_id = 'd-2'`); n != 0 {
		t.Errorf("the withdrawn subject is suppressed (%d rows), want not", n)
	}
	if n := l.count(t, `SELECT count(*) FROM events.suppressions WHERE lifted_at IS NULL AND device_id = 'd-1'`); n != 1 {
		t.Errorf("the running erasure's subject: %d suppressions, want 1", n)
	}
	if _, err := l.pg.Get(ctx, b.ID); !errors.Is(err, privacy.ErrNotFound) {
		t.Errorf("Get(withdrawn) = %v, want ErrNotFound", err)
	}
}

// flaky is a Redactor whose calls fail for one device with err.
type flaky struct {
	device string
	err    error
}

func (f flaky) RedactBatch(_ context.Context, s privacy.Subject, _ int) (int64, error) {
	if s.DeviceID == f.device {
		return 0, f.err
	}
	return 0, nil
}
func (f flaky) Remaining(context.Context, privacy.Subject) (int64, error) { return 0, nil }

var auditDown = fmt.Errorf("redact audit bodies: %w: %w", privacy.ErrUnavailable, errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"))

// TestRunner_StuckErasureDoesNotBlockOthers: the oldest erasure fails
// every try for a transient reason (its audit database step); it backs
// off and the younger one is done meanwhile. The stuck one stays running
// with its error and attempts, and gives up after the cap with the reason.
// Before, the runner took the oldest again at every poll, forever, and the
// other never ran.
func TestRunner_StuckErasureDoesNotBlockOthers(t *testing.T) {
	l := newLifecycle(t)
	stuck := l.queue(t, privacy.Subject{AppID: "app-1", DeviceID: "d-1"}, true)
	other := l.queue(t, privacy.Subject{AppID: "app-0", DeviceID: "d-2"}, true)
	l.run(t, flaky{device: "d-1", err: auditDown}, privacy.RunnerConfig{MaxBackoff: 300 * time.Millisecond, MaxAttempts: 6})

	e := l.wait(t, other.ID, privacy.StatusDone, 10*time.Second)
	if e.Report.Events == 0 {
		t.Errorf("the other erasure's report %+v, want its events", e.Report)
	}
	st, attempts, reason := l.row(t, stuck.ID)
	if st != privacy.StatusRunning || attempts < 1 || !strings.Contains(reason, "connection refused") {
		t.Errorf("stuck erasure: %s after %d attempts (%q), want running with its error", st, attempts, reason)
	}
	e = l.wait(t, stuck.ID, privacy.StatusFailed, 20*time.Second)
	if e.Attempts != 6 || !strings.Contains(e.Error, "gave up after 6 attempts") || !strings.Contains(e.Error, "connection refused") {
		t.Errorf("stuck erasure failed after %d attempts with %q, want 6 and the reason", e.Attempts, e.Error)
	}
	if e.Report.Events == 0 {
		t.Errorf("the stuck erasure's report %+v, want the events its first try erased", e.Report)
	}
	if n := testutil.ToFloat64(l.metrics.Retries); n != 5 {
		t.Errorf("privacy_erasure_retries_total = %v, want 5", n)
	}
	if n := testutil.ToFloat64(l.metrics.Erasures.WithLabelValues(privacy.StatusFailed, "")); n != 1 {
		t.Errorf("privacy_erasures_total{status=failed} = %v, want 1", n)
	}
}

// TestRunner_PermanentErrorFails: an error trying again cannot fix (a
// table missing, a grant missing) fails the erasure at its first try with
// the database's error as the reason; before it was retried forever.
func TestRunner_PermanentErrorFails(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, l *lifecycle) privacy.Redactor
		want  string
	}{
		{"PostgresTableMissing", func(t *testing.T, l *lifecycle) privacy.Redactor {
			if _, err := l.db.Exec(`DROP TABLE events.late_events`); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "late_events"},
		{"MariaDBCommandDenied", func(t *testing.T, l *lifecycle) privacy.Redactor {
			return flaky{device: "d-1", err: fmt.Errorf("redact audit bodies: %w: %w", privacy.ErrUnavailable,
				&mysql.MySQLError{Number: 1142, Message: "UPDATE command denied to user 'privacy'@'localhost' for table `audit`.`audit_events`"})}
		}, "command denied"},
		{"MariaDBTableMissing", func(t *testing.T, l *lifecycle) privacy.Redactor {
			_, adb := retentiontest.MariaDB(t)
			if _, err := adb.Exec(`DROP TABLE audit_events`); err != nil {
				t.Fatal(err)
			}
			return privacy.NewAuditDB(adb)
		}, "audit_events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLifecycle(t)
			e := l.queue(t, privacy.Subject{AppID: "app-1", DeviceID: "d-1"}, true)
			red := tt.setup(t, l)
			l.run(t, red, privacy.RunnerConfig{})
			got := l.wait(t, e.ID, privacy.StatusFailed, 10*time.Second)
			if got.Attempts != 1 || !strings.Contains(got.Error, tt.want) {
				t.Errorf("failed after %d attempts with %q, want 1 attempt and a reason naming %s", got.Attempts, got.Error, tt.want)
			}
		})
	}
}

// TestPermanent classifies database errors.
func TestPermanent(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "42501"}, true},  // permission denied
		{&pgconn.PgError{Code: "42P01"}, true},  // undefined table
		{&pgconn.PgError{Code: "55P03"}, false}, // lock not available
		{&pgconn.PgError{Code: "57P01"}, false}, // admin shutdown
		{&pgconn.PgError{Code: "40P01"}, false}, // deadlock
		{&pgconn.PgError{Code: "53300"}, false}, // too many connections
		{&mysql.MySQLError{Number: 1142}, true},
		{&mysql.MySQLError{Number: 1205}, false}, // lock wait timeout
		{mysql.ErrInvalidConn, false},
		{auditDown, false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("op: %w: %w", privacy.ErrUnavailable, tt.err)
		if got := privacy.Permanent(err); got != tt.want {
			t.Errorf("Permanent(%v) = %v, want %v", err, got, tt.want)
		}
	}
}

// TestRunner_NothingMatched: an erasure of a device the app never sent
// says it matched nothing; one that erased rows says erased. Before, both
// read "done", clean.
func TestRunner_NothingMatched(t *testing.T) {
	l := newLifecycle(t)
	none := l.queue(t, privacy.Subject{AppID: "app-1", DeviceID: "d-9"}, false)
	some := l.queue(t, privacy.Subject{AppID: "app-1", DeviceID: "d-1"}, false)
	l.run(t, nil, privacy.RunnerConfig{})
	if e := l.wait(t, none.ID, privacy.StatusDone, 10*time.Second); e.Report.Result != privacy.ResultNothingMatched {
		t.Errorf("erasure of an unknown device: result %q, want %q", e.Report.Result, privacy.ResultNothingMatched)
	}
	if e := l.wait(t, some.ID, privacy.StatusDone, 10*time.Second); e.Report.Result != privacy.ResultErased || e.Report.Events == 0 {
		t.Errorf("erasure of a known device: result %q with %d events, want %q and its events", e.Report.Result, e.Report.Events, privacy.ResultErased)
	}
	if n := testutil.ToFloat64(l.metrics.Erasures.WithLabelValues(privacy.StatusDone, privacy.ResultNothingMatched)); n != 1 {
		t.Errorf("privacy_erasures_total{status=done,result=nothing_matched} = %v, want 1", n)
	}
}

// TestPG_NoLiftWhileErasing: a subject's suppression cannot be lifted
// while an erasure of it is queued or running (409 on the API); the
// erasure's own lift at its end (suppress false) still works, and after
// it an admin's lift does. Before, the lift went through mid-erasure and
// the device's events were stored again while they were being deleted.
func TestPG_NoLiftWhileErasing(t *testing.T) {
	l := newLifecycle(t)
	ctx := context.Background()
	s := privacy.Subject{AppID: "app-1", DeviceID: "d-1"}
	first := l.queue(t, s, true)
	if _, err := l.pg.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.pg.Suppress(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := l.pg.CheckLift(ctx, s); !errors.Is(err, privacy.ErrBusy) {
		t.Errorf("CheckLift while erasing = %v, want ErrBusy", err)
	}
	if err := l.pg.LiftSuppression(ctx, s, "admin"); !errors.Is(err, privacy.ErrBusy) {
		t.Errorf("LiftSuppression while erasing = %v, want ErrBusy", err)
	}
	if n := l.count(t, `SELECT count(*) FROM events.suppressions WHERE lifted_at IS NULL`); n != 1 {
		t.Fatalf("%d active suppressions, want the erasure's 1", n)
	}
	first.Status = privacy.StatusDone
	if err := l.pg.Finish(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := l.pg.LiftSuppression(ctx, s, "admin"); err != nil {
		t.Errorf("LiftSuppression after the erasure = %v, want nil", err)
	}

	// An erasure with suppress false lifts at its end (itself open).
	second := l.queue(t, s, false)
	l.run(t, nil, privacy.RunnerConfig{})
	e := l.wait(t, second.ID, privacy.StatusDone, 10*time.Second)
	if e.Report.Suppressed || l.count(t, `SELECT count(*) FROM events.suppressions WHERE lifted_at IS NULL`) != 0 {
		t.Errorf("after an erasure without suppression: report %+v, suppressions active", e.Report)
	}
}

// TestRunner_ErasesDeviceDays: the investigation rollup naming each active
// device per day (facts.inv_device_days) loses the subject's rows, the same
// device id of another app and the other devices keep theirs, and the
// verification counts them. Before, an erasure left the device id there
// and called itself clean.
func TestRunner_ErasesDeviceDays(t *testing.T) {
	l := newLifecycle(t)
	if _, err := l.db.Exec(`INSERT INTO facts.inv_device_days (day, app_id, threat, country, cell, device_id)
		SELECT current_date - g, a, t, 'DE', '', d FROM generate_series(0, 2) g,
		       unnest(ARRAY['app-1', 'app-0']) a, unnest(ARRAY['', 'root']) t, unnest(ARRAY['d-1', 'd-2']) d`); err != nil {
		t.Fatal(err)
	}
	e := l.queue(t, privacy.Subject{AppID: "app-1", DeviceID: "d-1"}, true)
	l.run(t, nil, privacy.RunnerConfig{})
	got := l.wait(t, e.ID, privacy.StatusDone, 10*time.Second)
	if got.Report.DeviceDays != 6 || got.Report.Verification == nil || got.Report.Verification.DeviceDays != 0 {
		t.Errorf("report %+v (verification %+v), want 6 device days deleted and none left", got.Report, got.Report.Verification)
	}
	if n := l.count(t, `SELECT count(*) FROM facts.inv_device_days WHERE app_id = 'app-1' AND device_id = 'd-1'`); n != 0 {
		t.Errorf("%d rows of the subject left in facts.inv_device_days", n)
	}
	if n := l.count(t, `SELECT count(*) FROM facts.inv_device_days`); n != 18 {
		t.Errorf("%d rows of facts.inv_device_days left, want the other 18", n)
	}
}
