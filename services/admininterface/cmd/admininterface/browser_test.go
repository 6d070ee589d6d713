package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"threatview/admininterface/broker"
	"threatview/admininterface/internal/browsertest"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// stackEnv is what the browser test needs from the running stack.
type stackEnv struct {
	identity, tokens, audit, renderer, collector string
	adminUser, adminPassword, adminKey, internal string
}

func mustStack(t *testing.T) stackEnv {
	t.Helper()
	browsertest.MustChromium(t)
	return stackEnv{
		identity: testenv.MustEnv(t, "THREATVIEW_IDENTITY_URL"), tokens: testenv.MustEnv(t, "THREATVIEW_TOKENS_URL"),
		audit: testenv.MustEnv(t, "THREATVIEW_AUDIT_URL"), renderer: testenv.MustEnv(t, "THREATVIEW_RENDERER_URL"),
		collector: testenv.MustEnv(t, "THREATVIEW_COLLECTOR_URL"), adminUser: testenv.MustEnv(t, "THREATVIEW_ADMIN_USER"),
		adminPassword: testenv.MustEnv(t, "THREATVIEW_ADMIN_PASSWORD"), adminKey: testenv.MustEnv(t, "THREATVIEW_ADMIN_KEY"),
		internal: testenv.MustEnv(t, "INTERNAL_KEY"),
	}
}

// startUI runs this tree's admin interface on a free loopback port against
// the stack's services and returns its base URL.
func startUI(t *testing.T, st stackEnv) string {
	t.Helper()
	env := map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "LOG_LEVEL": "warn",
		"IDENTITY_SERVICE_URL": st.identity, "TOKENS_SERVICE_URL": st.tokens, "AUDITLOGGER_SERVICE_URL": st.audit,
		"VISUALRENDERER_SERVICE_URL": st.renderer, "INTERNAL_KEY": st.internal, "ALERTS_SERVICE_URL": os.Getenv("THREATVIEW_ALERTS_URL"), "PRIVACY_SERVICE_URL": os.Getenv("THREATVIEW_PRIVACY_URL"),
		"ADMINUI_SESSION_KEY": strings.Repeat("5a", 32), "ADMINUI_COLLECTOR_PUBLIC_URL": st.collector,
		"ADMINUI_STATUS_TARGETS": "collector=" + st.collector + ",auditlogger=" + st.audit + ",processor=http://127.0.0.1:8082," +
			"tokens=" + st.tokens + ",auditworker=http://127.0.0.1:8084,identity=" + st.identity + ",visualrenderer=" + st.renderer,
		"ADMINUI_SAMPLE_INTERVAL": "2s", "STOMP_ADDR": os.Getenv("STOMP_ADDR"),
		"EVENTS_DATABASE_URL": testenv.MustEnv(t, "EVENTS_DATABASE_URL"), "AUDIT_DATABASE_DSN": testenv.MustEnv(t, "AUDIT_DATABASE_DSN"),
		"ADMINUI_CLEANUP_COMMAND": testenv.MustBuild(t, "./services/retention/cmd/cleanup"), "PATH": os.Getenv("PATH"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	logs := &testenv.SyncBuffer{}
	go func() {
		done <- runWith(ctx, func(k string) string { return env[k] }, logs, func(a net.Addr) { addr <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if t.Failed() {
			t.Logf("admin interface log:\n%s", logs.String())
		}
	})
	select {
	case a := <-addr:
		return "http://" + a.String()
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("admin interface did not listen within 10s")
	}
	return ""
}

// postEvent sends one event with token, as an app would.
func postEvent(t *testing.T, collector, token, appID string) int {
	t.Helper()
	return postDeviceEvent(t, collector, token, appID, "")
}

// createPerson adds a person through identity's users API (admin key).
func createPerson(t *testing.T, st stackEnv, username, password string, roles ...string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"username": username, "password": password, "roles": roles})
	req, _ := http.NewRequest(http.MethodPost, st.identity+"/v1/users", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+st.adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create person %s: %d %s", username, resp.StatusCode, msg)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, st.identity+"/v1/users/"+username, nil)
		req.Header.Set("Authorization", "Bearer "+st.adminKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
}

// findDead browses a dead-letter queue for the message whose body holds
// marker, for at most d.
func findDead(t *testing.T, b *broker.Broker, queue, marker string, d time.Duration) broker.Message {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msgs, _, err := b.Browse(context.Background(), queue, 1000, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if bytes.Contains(m.Body, []byte(marker)) {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message with %q in %s after %s", marker, queue, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestBrowser_Walk walks the real stack through the admin interface as a
// person would, in Chromium. With THREATVIEW_UPDATE_SCREENSHOTS=1 it writes
// the screenshots to docs/ui/.
func TestBrowser_Walk(t *testing.T) {
	st := mustStack(t)
	base := startUI(t, st)
	w := browsertest.New(t, base)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	brokerCfg := testenv.MustBroker(t)
	pub := mq.NewPublisher(brokerCfg, log)
	t.Cleanup(func() { pub.Close() })
	brk := broker.New(brokerCfg, pub, log)
	app := testenv.Name("ui-app")
	start := time.Now().UTC().Add(-time.Minute).Format("2006-01-02T15:04:05")

	// Sign in as the stack's first admin.
	w.Open("/login", "#username")
	w.Shot("login")
	w.SignIn(st.adminUser, st.adminPassword)

	// Create a token: shown once, with a copy button and a curl.
	w.Open("/tokens", "#app_id")
	w.Do("create a token", chromedp.SendKeys(chromedp.CSS("#app_id"), app), chromedp.SendKeys(chromedp.CSS("#name"), "browser test"),
		chromedp.Click(chromedp.CSS(`form[action="/tokens"][method="post"] button`)), chromedp.WaitVisible(chromedp.CSS("#secret")))
	secret := w.Value("#secret")
	curl := w.Value("#curl")
	if secret == "" || !strings.Contains(curl, "Bearer "+secret) || !strings.Contains(curl, st.collector+"/v1/events") {
		t.Fatalf("token page: secret %q, curl %q", secret, curl)
	}
	w.Shot("token-created")
	w.Do("copy button", chromedp.Click(chromedp.CSS(`button[data-copy="secret"]`)))

	// Post an event with it, as the curl would, and see it counted.
	if code := postEvent(t, st.collector, secret, app); code != http.StatusAccepted {
		t.Fatalf("POST /v1/events with the new token = %d, want 202", code)
	}
	dash := "/dashboards?app_id=" + app + "&range=24h"
	w.Eventually(30*time.Second, dash, `strong[data-dimension="country"]`, "the event on the dashboard", func() bool {
		return w.Text(`strong[data-dimension="country"]`) == "1"
	})
	w.Shot("dashboards")
	// The apps list is paged; the filter (kept in the URL) finds the app,
	// whose page lists its token.
	w.Open("/tokens", "#q")
	if !strings.Contains(w.Text("#apps-count"), "apps") {
		t.Errorf("the apps list does not count the apps: %q", w.Text("#apps-count"))
	}
	w.Shot("tokens")
	w.Do("filter the apps", chromedp.SendKeys(chromedp.CSS("#q"), app), chromedp.Click(chromedp.CSS(`form[role="search"] button`)))
	w.WaitLocation("q=" + app)
	w.Do("see the filtered list", chromedp.WaitVisible(chromedp.CSS(`main a[href="/tokens/apps/`+app+`"]`)))
	if loc := w.Location(); !strings.Contains(loc, "q="+app) {
		t.Errorf("the filter is not in the URL: %s", loc)
	}
	if got := w.Text("#apps-count"); !strings.HasPrefix(got, "1 of ") {
		t.Errorf("filtering on %s: %q, want one app", app, got)
	}
	w.Shot("tokens-filtered")
	w.Do("open the app", chromedp.Click(chromedp.CSS(`main a[href="/tokens/apps/`+app+`"]`)), chromedp.WaitVisible(chromedp.CSS("#tokens-h")))
	if !strings.Contains(w.Text("main table"), "browser test") {
		t.Errorf("app %s's page does not list its token", app)
	}
	w.Shot("tokens-app")

	// Find the token's creation in the audit trail, and export it.
	auditPath := "/audit?searched=1&from=" + start + "&action=tokens.create&actor=" + st.adminUser
	var tokenID string
	w.Eventually(30*time.Second, auditPath, "main table", "the token creation in the audit trail", func() bool {
		return strings.Contains(w.Text("main table"), "tokens.create") && strings.Contains(w.Text("main table"), "token:")
	})
	w.Shot("audit")
	hc, cookie := w.CookieClient()
	for _, format := range []string{"csv", "ndjson"} {
		req, _ := http.NewRequest(http.MethodGet, base+"/audit/export."+format+"?searched=1&from="+start+"&action=tokens.create", nil)
		req.Header.Set("Cookie", cookie)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("tokens.create")) {
			t.Fatalf("export %s = %d: %.300s", format, resp.StatusCode, body)
		}
		if format == "ndjson" {
			for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
				var rec wire.AuditRecord
				if err := json.Unmarshal(line, &rec); err != nil {
					t.Fatalf("NDJSON line %q: %v", line, err)
				}
				if rec.ActorToken == st.adminUser && strings.HasPrefix(rec.Resource, "token:") {
					tokenID = strings.TrimPrefix(rec.Resource, "token:")
				}
			}
		}
	}
	if tokenID == "" {
		t.Fatal("the export has no token creation by the admin")
	}

	// Revoke it with a confirmation, and see the collector refuse it.
	w.Open("/tokens/apps/"+app, "#tokens-h")
	w.Do("revoke button", chromedp.Click(chromedp.CSS(`a.danger[href="/tokens/`+tokenID+`/revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	w.Shot("token-revoke")
	w.Do("revoke", chromedp.Click(chromedp.CSS(`button[name="confirm"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if loc := w.Location(); !strings.HasSuffix(loc, "/tokens/apps/"+app+"?done=revoked") {
		t.Errorf("after revoking: at %s, want the app's page", loc)
	}
	revoked := time.Now()
	for postEvent(t, st.collector, secret, app) != http.StatusUnauthorized {
		if time.Since(revoked) > 30*time.Second {
			t.Fatal("the collector still accepts the revoked token after 30s")
		}
		time.Sleep(time.Second)
	}
	t.Logf("collector refused the revoked token after %s", time.Since(revoked).Round(100*time.Millisecond))

	// Dead-letter a message: one the processor can never store (the real
	// path), and one batch of a storable event, as one left behind by an
	// outage would be. Delete the first, replay the second and see it counted.
	marker := uuid.NewString()
	if err := pub.Send(context.Background(), wire.EventsQueue, []byte(`{"v":1,"events":"`+marker+`"}`), nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	batch, _ := json.Marshal(wire.EventBatch{V: 1, Events: []wire.Event{{
		ID: uuid.Must(uuid.NewV7()).String(), Type: "app.startup", ReceivedAt: now, OccurredAt: now,
		App: wire.App{ID: app, Version: "1.0.0"}, Device: wire.Device{Model: "Pixel 8", OS: "android"}, Country: "FR",
		RequestID: marker + "-replay",
	}}})
	if err := pub.Send(context.Background(), wire.DeadLetter(wire.EventsQueue), batch,
		map[string]string{wire.HeaderDeadLetterReason: "browser test: left behind by an outage"}); err != nil {
		t.Fatal(err)
	}
	dlq := wire.DeadLetter(wire.EventsQueue)
	bad := findDead(t, brk, dlq, marker+`"`, 30*time.Second)
	if bad.Reason == "" {
		t.Errorf("the processor dead-lettered without a reason")
	}
	good := findDead(t, brk, dlq, marker+"-replay", 5*time.Second)
	w.Open("/dlq", "main table")
	w.Shot("dlq")
	w.Open("/dlq/events/message?id="+bad.ID, "pre.code")
	if !strings.Contains(w.Text("pre.code"), marker) || !strings.Contains(w.Text("main"), bad.Reason[:min(len(bad.Reason), 40)]) {
		t.Errorf("the message page does not show the body and the reason %q", bad.Reason)
	}
	w.Shot("dlq-message")
	w.Do("delete", chromedp.Click(chromedp.CSS(`a.danger[href^="/dlq/events/delete"]`)), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)))
	w.Shot("dlq-delete")
	w.Do("confirm delete", chromedp.Click(chromedp.CSS(`button[name="confirm"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if _, err := brk.Get(context.Background(), dlq, bad.ID, 1000); err == nil {
		t.Errorf("the deleted message is still in %s", dlq)
	}
	w.Open("/dlq/events/message?id="+good.ID, "pre.code")
	w.Do("replay", chromedp.Click(chromedp.CSS(`a[href^="/dlq/events/replay"]`)), chromedp.WaitVisible(chromedp.CSS(`button[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(`button[name="confirm"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	w.Eventually(30*time.Second, dash, `strong[data-dimension="country"]`, "the replayed event on the dashboard", func() bool {
		return w.Text(`strong[data-dimension="country"]`) == "2"
	})
	// Both actions are in the audit trail with the person as the actor.
	for _, action := range []string{"dlq.delete", "dlq.replay"} {
		w.Eventually(30*time.Second, "/audit?searched=1&from="+start+"&action="+action+"&actor="+st.adminUser, "main table",
			action+" in the audit trail", func() bool { return strings.Contains(w.Text("main table"), "queue:DLQ.threatview.events/") })
	}

	// The status page shows every service and both queues with their DLQs.
	w.Open("/status", "main table")
	status := w.Text("main")
	for _, want := range []string{"collector", "processor", "threatview.events", "DLQ.threatview.audit", "events/s"} {
		if !strings.Contains(status, want) {
			t.Errorf("the status page does not mention %q", want)
		}
	}
	// Its backlog table reads the running collector's broker_* gauges and
	// the processor's aggregation lag: each a figure, none "unknown".
	w.Eventually(45*time.Second, "/status", "#backlog", "the backlog figures", func() bool {
		return browsertest.Eval[int](w, `document.querySelectorAll('#backlog tbody tr').length`) == 4 &&
			!strings.Contains(w.Text("#backlog"), "unknown")
	})
	backlogText := w.Text("#backlog")
	for _, want := range []string{"Events queue depth", "messages", "Oldest message on the events queue", "Broker store in use", "%", "Aggregation lag"} {
		if !strings.Contains(backlogText, want) {
			t.Errorf("the status page's backlog table does not show %q:\n%s", want, backlogText)
		}
	}
	w.Shot("status")

	// Retention: partitions of both databases, archives, and the dry run.
	w.Open("/retention", "main table")
	page := w.Text("main")
	for _, want := range []string{"events.events", "facts.facts", "audit_events"} {
		if !strings.Contains(page, want) {
			t.Errorf("the retention page does not list %s", want)
		}
	}
	w.Do("dry run", chromedp.Click(chromedp.CSS(`form[action="/retention/dry-run"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`section[aria-labelledby="dry-h"] table`)))
	if dry := w.Text(`section[aria-labelledby="dry-h"]`); !strings.Contains(dry, "cleanup started") || strings.Contains(dry, "The dry run failed") {
		t.Errorf("the dry run did not run: %q", dry)
	}
	w.Shot("retention")
	w.SignOut()

	// An analyst sees the dashboards and is refused the token pages.
	analyst := testenv.Name("analyst")
	createPerson(t, st, analyst, "analyst-password-1", "analyst")
	w.SignIn(analyst, "analyst-password-1")
	if strings.Contains(w.Text("nav"), "tokens") {
		t.Errorf("the analyst's navigation offers tokens")
	}
	w.Refused = append(w.Refused, "/tokens")
	w.Open("/tokens", "main p")
	if !strings.Contains(w.Text("main"), "do not allow") {
		t.Errorf("/tokens as an analyst: %q", w.Text("main"))
	}
	w.Shot("analyst-refused")
	w.Do("phone width", chromedp.EmulateViewport(390, 844))
	w.Open(dash, `strong[data-dimension="country"]`)
	w.Shot("dashboards-phone")
	w.Do("back to desktop", chromedp.EmulateViewport(1280, 800))

	if errs := w.ConsoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
