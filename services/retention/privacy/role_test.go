package privacy_test

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/privacy"
	"threatview/retention/store"
)

// asRole returns dbURL with the login of role (password = the role's name,
// as scripts/stack.sh creates the services' roles), or skips when the role
// does not exist (a failure under THREATVIEW_REQUIRE_SERVICES).
func asRole(t *testing.T, dbURL, role string) string {
	t.Helper()
	pool := open(t, dbURL)
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1 AND rolcanlogin)`, role).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if !ok {
		if os.Getenv("THREATVIEW_REQUIRE_SERVICES") != "" {
			t.Fatalf("role %s does not exist (scripts/stack.sh pg_service_roles makes it)", role)
		}
		t.Skipf("role %s does not exist", role)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, role)
	return u.String()
}

// TestRunner_AsPrivacyRole: the privacy service's grants (migration events
// 000091, role threatview_privacy) are enough for a whole erasure — the
// request stored and queued, suppression, events, facts, rollups, late
// events, the verification — and for rewriting the archived months
// (partitions read directly, archive records moved); they are not enough
// to write an event or touch the alerts schema.
func TestRunner_AsPrivacyRole(t *testing.T) {
	ctx := context.Background()
	owner, db := retentiontest.Postgres(t)
	fill(t, db, 3000, 20)
	if _, err := db.Exec(`INSERT INTO events.late_events (id, received_at, occurred_at, type, app_id, device_id, country, payload, reason)
		SELECT gen_random_uuid(), now(), now(), 'app.startup', 'app-1', 'd-3', 'DE', '{}', 'archived'`); err != nil {
		t.Fatalf("late event: %v", err)
	}
	st, err := store.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	archiver := &retention.Archiver{Src: retentiontest.EventsSource(t, owner), Store: st, ChunkRows: 500, Log: quiet}
	if _, err := archiver.Run(ctx); err != nil {
		t.Fatalf("archive (as the owner) = %v", err)
	}

	dbURL := asRole(t, owner, "threatview_privacy")
	l := &lifecycle{pool: open(t, dbURL), db: db, metrics: privacy.NewMetrics(prometheus.NewRegistry())}
	l.pg = privacy.NewPG(l.pool)
	e := l.queue(t, privacy.Subject{AppID: "app-1", DeviceID: "d-3"}, true)
	r := privacy.NewRunner(l.pg, nil, privacy.RunnerConfig{BatchRows: 100, Poll: 20 * time.Millisecond},
		l.metrics, quiet).WithArchives(&privacy.ArchiveRewriter{Log: quiet, Rollups: l.pg,
		Archiver: &retention.Archiver{Src: retentiontest.EventsSource(t, dbURL), Store: st, ChunkRows: 500, Log: quiet}})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx, l.pool) }()
	t.Cleanup(func() { cancel(); <-done })
	got := l.wait(t, e.ID, privacy.StatusDone, 30*time.Second)
	rep := got.Report
	if rep.Events == 0 || rep.Facts != rep.Events || rep.LateEvents != 1 || len(rep.ArchivesRewritten) == 0 || rep.Result != privacy.ResultErased {
		t.Errorf("report as the privacy role: %+v, want events, facts, the late event and archives erased", rep)
	}
	for _, q := range []string{
		`INSERT INTO events.events (id, received_at, occurred_at, type, app_id, device_id, country, payload) VALUES (gen_random_uuid(), now(), now(), 't', 'a', 'd', 'DE', '{}')`,
		`SELECT count(*) FROM alerts.rules`,
	} {
		if _, err := l.pool.Exec(ctx, q); err == nil || !privacy.Permanent(err) {
			t.Errorf("as the privacy role %q = %v, want permission denied", q, err)
		}
	}
}
