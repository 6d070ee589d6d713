package evaluate

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/alerts/internal/pgtest"
	"threatview/alerts/internal/smtptest"
	"threatview/alerts/notify"
	"threatview/alerts/postgres"
	"threatview/platform/pipeline"
)

func TestNext(t *testing.T) {
	for _, c := range []struct {
		state     string
		value, th int64
		want      string
	}{
		{"ok", 49, 50, ""}, {"ok", 50, 50, "firing"}, {"firing", 45, 50, ""}, {"firing", 41, 50, ""},
		{"firing", 40, 50, "resolved"}, {"firing", 0, 1, "resolved"}, {"ok", 0, 1, ""}, {"firing", 1, 1, ""},
	} {
		if got := Next(c.state, c.value, c.th); got != c.want {
			t.Errorf("Next(%q, %d, %d) = %q, want %q", c.state, c.value, c.th, got, c.want)
		}
	}
}

// mustCreate validates and stores r.
func mustCreate(t *testing.T, st *postgres.Store, r *alerts.Rule) {
	t.Helper()
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRule(t.Context(), r, nil); err != nil {
		t.Fatal(err)
	}
}

// secret32 is a webhook secret of the shortest length accepted.
const secret32 = "0123456789abcdef0123456789abcdef"

// loopback is an egress guard that lets the tests' loopback receivers in.
func loopback(t *testing.T) *egress.Guard {
	p, err := egress.ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	return egress.NewGuard(p)
}

// receiver is a webhook endpoint that records each delivery and checks its
// signature; it answers fail with 503 while fail > 0.
type receiver struct {
	mu     sync.Mutex
	secret string
	got    []alerts.Notification
	ids    []string
	fail   int
	badSig int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.fail > 0 {
		rc.fail--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if notify.Verify(rc.secret, r.Header.Get(notify.SignatureHeader), r.Header.Get(notify.DeliveryHeader), b, time.Now(), notify.VerifyWindow) != nil {
		rc.badSig++
	}
	var n alerts.Notification
	_ = json.Unmarshal(b, &n)
	rc.got = append(rc.got, n)
	rc.ids = append(rc.ids, r.Header.Get(notify.DeliveryHeader))
}

func (rc *receiver) deliveries() []alerts.Notification {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]alerts.Notification(nil), rc.got...)
}

func TestLoop_FireResolveOnce(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	rc := &receiver{secret: secret32}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx := t.Context()

	rule := alerts.Rule{ID: uuid.NewString(), Name: "hooking spike", AppID: "app-a", Threat: "hooking",
		WindowSeconds: 300, Threshold: 50, CreatedBy: "test",
		Channel: alerts.Channel{Type: alerts.ChannelWebhook, URL: srv.URL, Secret: secret32}}
	mustCreate(t, st, &rule)
	base := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	pgtest.Insert(t, pool, 1, 0, 30, "app-a", base, "hooking", "root")
	pgtest.Insert(t, pool, 1, 30, 30, "app-a", base.Add(30*time.Second), "hooking")
	pgtest.Insert(t, pool, 1, 60, 100, "app-b", base, "hooking") // another app
	pgtest.Insert(t, pool, 1, 160, 100, "app-a", base, "root")   // another threat

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	newLoop := func() *Loop {
		l := New(st, notify.New(5*time.Second, notify.SMTP{}, loopback(t)), Config{Every: time.Second, Attempts: 3,
			Backoff: pipeline.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}, NewMetrics(prometheus.NewRegistry()), log)
		return l
	}
	// Two loops (a leader and one that still thinks it leads) evaluate
	// the same state at once: one transition, one delivery.
	a, b := newLoop(), newLoop()
	a.now = func() time.Time { return base.Add(40 * time.Second) }
	b.now = a.now
	var wg sync.WaitGroup
	for _, l := range []*Loop{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); l.Round(ctx) }()
	}
	wg.Wait()
	a.Round(ctx)
	got := rc.deliveries()
	if len(got) != 1 || got[0].State != "firing" || got[0].Value != 60 || got[0].Threshold != 50 || got[0].RuleID != rule.ID {
		t.Fatalf("deliveries after the spike = %+v, want one firing with value 60", got)
	}
	if rc.badSig != 0 {
		t.Fatalf("%d deliveries had a bad signature", rc.badSig)
	}
	var minutes int64
	_ = pool.QueryRow(ctx, `SELECT sum(count) FROM alerts.threat_minutes`).Scan(&minutes)
	if minutes != 30*2+30+100+100 {
		t.Fatalf("minute counts sum to %d, want %d (one per threat of each row)", minutes, 30*2+30+100+100)
	}

	// 45 in the window: above the resolve point (40), still firing.
	a.now = func() time.Time { return base.Add(10 * time.Minute) }
	pgtest.Insert(t, pool, 2, 0, 45, "app-a", base.Add(9*time.Minute), "hooking")
	a.Round(ctx)
	if got := rc.deliveries(); len(got) != 1 {
		t.Fatalf("deliveries at 45 of 50 = %d, want still 1 (hysteresis)", len(got))
	}
	a.now = func() time.Time { return base.Add(20 * time.Minute) }
	a.Round(ctx)
	a.Round(ctx)
	got = rc.deliveries()
	if len(got) != 2 || got[1].State != "resolved" || got[1].Value != 0 {
		t.Fatalf("deliveries after the spike passed = %+v, want firing then resolved", got)
	}
	hist, err := st.History(ctx, rule.ID, 10)
	if err != nil || len(hist) != 2 || hist[0].Notification != "sent" || hist[1].State != "firing" {
		t.Fatalf("History = %+v, %v", hist, err)
	}
	if rc.ids[0] == rc.ids[1] || rc.ids[0] == "" {
		t.Fatalf("delivery ids %v, want distinct transition ids", rc.ids)
	}
}

func TestLoop_RetryDeadSilence(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	rc := &receiver{secret: secret32, fail: 100}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx := t.Context()
	mk := func(name string, silenced *time.Time) alerts.Rule {
		r := alerts.Rule{ID: uuid.NewString(), Name: name, WindowSeconds: 60, Threshold: 5, CreatedBy: "test",
			SilencedUntil: silenced, Channel: alerts.Channel{Type: alerts.ChannelWebhook, URL: srv.URL, Secret: secret32}}
		mustCreate(t, st, &r)
		return r
	}
	until := time.Now().Add(time.Hour)
	failing := mk("failing receiver", nil)
	silenced := mk("silenced", &until)
	base := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	pgtest.Insert(t, pool, 3, 0, 10, "app-a", base, "jailbreak")
	l := New(st, notify.New(5*time.Second, notify.SMTP{}, loopback(t)), Config{Every: time.Second, Attempts: 3,
		Backoff: pipeline.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}, NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.now = func() time.Time { return base.Add(10 * time.Second) }
	for i := 0; i < 5; i++ {
		l.Round(ctx)
		time.Sleep(5 * time.Millisecond)
	}
	dead, err := st.Notifications(ctx, "dead", 10)
	if err != nil || len(dead) != 1 || dead[0].RuleID != failing.ID || dead[0].Attempts != 3 || dead[0].LastError == "" {
		t.Fatalf("dead letters = %+v, %v; want the failing rule's firing after 3 attempts", dead, err)
	}
	hist, _ := st.History(ctx, silenced.ID, 10)
	if len(hist) != 1 || !hist[0].Silenced || hist[0].Notification != "" {
		t.Fatalf("silenced rule's history = %+v, want one silenced transition without notification", hist)
	}
}

// TestLoop_Baseline fires a baseline rule only when the window's count
// reaches both the minimum and factor times the mean of the same window on
// the 7 days before.
func TestLoop_Baseline(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	rc := &receiver{secret: secret32}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx := t.Context()
	rule := alerts.Rule{ID: uuid.NewString(), Name: "root rise", AppID: "app-b", Threat: "root", Kind: alerts.KindBaseline,
		Factor: 3, WindowSeconds: 300, Threshold: 10, CreatedBy: "test",
		Channel: alerts.Channel{Type: alerts.ChannelWebhook, URL: srv.URL, Secret: secret32}}
	mustCreate(t, st, &rule)
	now := time.Now().UTC().Truncate(time.Minute).Add(-30 * time.Second)
	// 20 a day at this time on each of the 7 days before: baseline 20,
	// so the rule needs 60 (3 x 20), not just its minimum of 10.
	for d := 1; d <= 7; d++ {
		pgtest.Insert(t, pool, 10+d, 0, 20, "app-b", now.Add(-time.Duration(d)*24*time.Hour), "root")
	}
	pgtest.Insert(t, pool, 20, 0, 59, "app-b", now.Add(-time.Minute), "root")
	l := New(st, notify.New(5*time.Second, notify.SMTP{}, loopback(t)), Config{Every: time.Second}, NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.now = func() time.Time { return now }
	l.Round(ctx)
	if got := rc.deliveries(); len(got) != 0 {
		t.Fatalf("deliveries at 59 against a baseline of 20 x 3 = %+v, want none", got)
	}
	pgtest.Insert(t, pool, 21, 0, 1, "app-b", now.Add(-time.Minute), "root")
	l.Round(ctx)
	if got := rc.deliveries(); len(got) != 1 || got[0].State != "firing" || got[0].Value != 60 || got[0].Threshold != 60 {
		t.Fatalf("deliveries at 60 = %+v, want one firing at threshold 60", got)
	}
}

// crashAfterSend delivers through the real sender and then ends the
// round's context, as a leader killed after the receiver took the
// notification and before it recorded that.
type crashAfterSend struct {
	inner Sender
	crash context.CancelFunc
}

func (c crashAfterSend) Send(ctx context.Context, ch alerts.Channel, id string, body []byte) error {
	err := c.inner.Send(ctx, ch, id, body)
	c.crash()
	return err
}

// TestLoop_ResendAfterCrashSameDeliveryID: a leader dies after the SMTP
// server and the webhook took a notification and before it marked it sent;
// the next leader sends it again, and the copy carries the same delivery id
// (email Message-ID and X-ThreatView-Delivery, webhook
// X-ThreatView-Delivery) as the first, the id stored with the notification.
func TestLoop_ResendAfterCrashSameDeliveryID(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	box, addr := smtptest.Start(t)
	rc := &receiver{secret: secret32}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx := t.Context()
	for _, ch := range []alerts.Channel{{Type: alerts.ChannelEmail, To: "secteam@threatview.test"},
		{Type: alerts.ChannelWebhook, URL: srv.URL, Secret: secret32}} {
		r := alerts.Rule{ID: uuid.NewString(), Name: "crash " + ch.Type, AppID: "app-c", WindowSeconds: 60, Threshold: 5,
			CreatedBy: "test", Channel: ch}
		mustCreate(t, st, &r)
	}
	base := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	pgtest.Insert(t, pool, 30, 0, 10, "app-c", base, "hooking")
	real := notify.New(5*time.Second, notify.SMTP{Addr: addr, From: "alerts@threatview.test", TLS: notify.TLSNone}, loopback(t))
	cfg := Config{Every: time.Second, SendTimeout: time.Second, Backoff: pipeline.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Two leaders die, each right after one delivery.
	for range 2 {
		rctx, crash := context.WithCancel(ctx)
		dying := New(st, crashAfterSend{inner: real, crash: crash}, cfg, NewMetrics(prometheus.NewRegistry()), log)
		dying.now = func() time.Time { return base.Add(10 * time.Second) }
		dying.Round(rctx)
		crash()
	}
	if n := len(box.Messages()) + len(rc.deliveries()); n != 2 {
		t.Fatalf("%d deliveries before the restart, want one email and one webhook", n)
	}
	// The next leader, once the dead one's lease ends, sends both again.
	next := New(st, real, cfg, NewMetrics(prometheus.NewRegistry()), log)
	next.now = func() time.Time { return base.Add(20 * time.Second) }
	deadline := time.Now().Add(30 * time.Second)
	for len(box.Messages()) < 2 || len(rc.deliveries()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no resend within 30 s: %d emails, %d webhook deliveries", len(box.Messages()), len(rc.deliveries()))
		}
		time.Sleep(500 * time.Millisecond)
		next.Round(ctx)
	}
	stored := map[string]bool{}
	rows, err := pool.Query(ctx, `SELECT delivery_id::text FROM alerts.notifications WHERE status = 'sent'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		stored[id] = true
	}
	if rows.Err() != nil || len(stored) != 2 {
		t.Fatalf("sent notifications' delivery ids = %v (%v), want 2", stored, rows.Err())
	}
	mails := box.Messages()
	id := mails[0].Header(notify.DeliveryHeader)
	if !stored[id] || mails[0].Header("Message-ID") != notify.MessageID(id) {
		t.Fatalf("first email: delivery id %q, Message-ID %q; want a stored delivery id in both", id, mails[0].Header("Message-ID"))
	}
	if mails[1].Header(notify.DeliveryHeader) != id || mails[1].Header("Message-ID") != notify.MessageID(id) {
		t.Errorf("resent email: delivery id %q, Message-ID %q; want %q as the first copy", mails[1].Header(notify.DeliveryHeader),
			mails[1].Header("Message-ID"), id)
	}
	rc.mu.Lock()
	ids := append([]string(nil), rc.ids...)
	rc.mu.Unlock()
	if len(ids) != 2 || ids[0] != ids[1] || !stored[ids[0]] || ids[0] == id {
		t.Errorf("webhook delivery ids %v, want one stored id twice, not the email's %q", ids, id)
	}
}

// TestLoop_CountryOSScope: rules scoped to a country, an OS family, or
// both count only their events; the OS is matched by family whatever its
// case, and the scoped counts add up to the unscoped ones.
func TestLoop_CountryOSScope(t *testing.T) {
	_, st, pool := pgtest.MustStore(t)
	rc := &receiver{secret: secret32}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx := t.Context()
	mk := func(name, country, os string) alerts.Rule {
		r := alerts.Rule{ID: uuid.NewString(), Name: name, AppID: "app-g", Threat: "hooking", Country: country, OS: os,
			WindowSeconds: 300, Threshold: 5, CreatedBy: "test",
			Channel: alerts.Channel{Type: alerts.ChannelWebhook, URL: srv.URL, Secret: secret32}}
		mustCreate(t, st, &r)
		return r
	}
	de := mk("germany", "de", "")
	ios := mk("ios", "", "iOS")
	frAndroid := mk("france android", "FR", "android")
	unknown := mk("unplaced other", "ZZ", "other")
	base := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	pgtest.InsertFrom(t, pool, 40, 0, 10, "app-g", "DE", "Android", base, "hooking")
	pgtest.InsertFrom(t, pool, 40, 10, 3, "app-g", "FR", "android", base, "hooking")
	pgtest.InsertFrom(t, pool, 40, 20, 4, "app-g", "FR", "iOS", base, "hooking", "root")
	pgtest.InsertFrom(t, pool, 40, 30, 2, "app-g", "US", "IOS", base, "hooking")
	pgtest.InsertFrom(t, pool, 40, 40, 6, "app-g", "", "Symbian", base, "hooking")
	pgtest.InsertFrom(t, pool, 40, 50, 20, "app-h", "FR", "android", base, "hooking") // another app
	pgtest.InsertFrom(t, pool, 40, 70, 20, "app-g", "FR", "android", base, "root")    // another threat
	l := New(st, notify.New(5*time.Second, notify.SMTP{}, loopback(t)), Config{Every: time.Second}, NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.now = func() time.Time { return base.Add(30 * time.Second) }
	l.Round(ctx)
	fired := map[string]alerts.Notification{}
	for _, n := range rc.deliveries() {
		fired[n.RuleID] = n
	}
	if n, ok := fired[de.ID]; !ok || n.Value != 10 || n.Country != "DE" {
		t.Errorf("germany rule: %+v, want firing at 10 with country DE", n)
	}
	if n, ok := fired[ios.ID]; !ok || n.Value != 6 || n.OS != "ios" {
		t.Errorf("ios rule: %+v, want firing at 6 (iOS and IOS) with os ios", n)
	}
	if n, ok := fired[unknown.ID]; !ok || n.Value != 6 {
		t.Errorf("unknown country, other OS rule: %+v, want firing at 6", n)
	}
	if n, ok := fired[frAndroid.ID]; ok || len(fired) != 3 {
		t.Errorf("france android rule fired at 3 of 5: %+v; all deliveries %+v", n, rc.deliveries())
	}
	var plain, scoped int64
	_ = pool.QueryRow(ctx, `SELECT sum(count) FROM alerts.threat_minutes`).Scan(&plain)
	_ = pool.QueryRow(ctx, `SELECT sum(count) FROM alerts.threat_minutes_scoped`).Scan(&scoped)
	if plain != 10+3+8+2+6+20+20 || scoped != plain {
		t.Errorf("minute counts sum to %d, scoped %d; want both %d", plain, scoped, 10+3+8+2+6+20+20)
	}
}
