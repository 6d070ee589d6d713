package webui

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"threatview/admininterface"
	"threatview/admininterface/upstream"
	"threatview/platform/httpserver"
)

// investigationFake answers the renderer's investigation API and identity's
// people API the way the contract says, and remembers the queries.
func investigationFake(h *harness) *[]string {
	seen := &[]string{}
	h.fake.users["uma"] = []string{admininterface.RoleUserAdmin}
	ev := map[string]any{"event_id": "0193e3a0-0000-7000-8000-000000000001", "type": "app.startup",
		"occurred_at": time.Now().UTC(), "received_at": time.Now().UTC(),
		"app": map[string]any{"id": "demo", "version": "1.2"}, "device": map[string]any{"id": "dev-1", "model": "Pixel 8", "os": "android", "os_version": "14"},
		"session": map[string]any{"id": "sess-1"}, "user": map[string]any{"pseudonym": "u_abc"}, "country": "FR",
		"threats": []map[string]any{{"type": "root", "category": "platform-integrity", "severity": "high"}}}
	bad := map[string]any{"event_id": "0193e3a0-0000-7000-8000-000000000002", "type": "=HYPERLINK(\"x\")",
		"occurred_at": time.Now().UTC(), "received_at": time.Now().UTC(), "app": map[string]any{"id": "demo"}, "device": map[string]any{"id": "+dev"}}
	h.fake.extra = func(w http.ResponseWriter, r *http.Request) bool {
		*seen = append(*seen, r.URL.Path+"?"+r.URL.RawQuery)
		switch {
		case r.URL.Path == "/v1/overview":
			n := int64(5)
			if strings.HasPrefix(r.URL.Query().Get("from"), time.Now().UTC().Format("2006-01-02")) {
				n = 7
			}
			httpserver.WriteJSON(w, 200, upstream.Overview{Events: n, ThreatEvents: 3, Users: 2, Devices: 4, Apps: 1})
		case r.URL.Path == "/v1/map":
			httpserver.WriteJSON(w, 200, map[string]any{"countries": []map[string]any{{"country": "FR", "events": 6, "devices": 3}, {"country": "US", "events": 1, "devices": 1}},
				"cells": []map[string]any{{"lat": 48.8, "lon": 2.3, "events": 6, "devices": 3}}})
		case r.URL.Path == "/v1/events/stream":
			// One event, then the end of the stream (the fake holds a lock
			// while it answers); the browser's EventSource reconnects.
			w.Header().Set("Content-Type", "text/event-stream")
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "data: %s\n\n", b)
		case r.URL.Path == "/v1/events":
			httpserver.WriteJSON(w, 200, map[string]any{"events": []any{ev, bad}, "next_cursor": ""})
		case r.URL.Path == "/v1/taxonomy":
			httpserver.WriteJSON(w, 200, map[string]any{"threats": []map[string]any{{"type": "root", "category": "platform-integrity", "severity": "high"}}})
		case r.URL.Path == "/v1/stats/threat":
			httpserver.WriteJSON(w, 200, upstream.Stats{Dimension: "threat", Total: 3, Series: []upstream.Series{{Key: "root", Total: 3}}})
		case strings.HasPrefix(r.URL.Path, "/v1/reports/threats/"):
			httpserver.WriteJSON(w, 200, map[string]any{"threat": "root", "category": "platform-integrity", "events": 3, "devices": 2,
				"by_os": []map[string]any{{"key": "android", "count": 3}}, "by_country": []map[string]any{{"key": "FR", "count": 3}},
				"series": []map[string]any{{"t": time.Now().UTC().Truncate(24 * time.Hour), "count": 3}}})
		case strings.HasPrefix(r.URL.Path, "/v1/timelines/device/"):
			httpserver.WriteJSON(w, 200, map[string]any{"first_seen": time.Now().UTC(), "last_seen": time.Now().UTC(), "events": 2,
				"threats": map[string]int{"root": 1}, "apps": []map[string]any{{"id": "demo", "versions": []string{"1.2"}}},
				"os": []string{"android 14"}, "countries": []string{"FR"}, "recent": []any{ev}})
		case strings.HasPrefix(r.URL.Path, "/v1/users/") && r.Method == http.MethodGet:
			name := strings.TrimPrefix(r.URL.Path, "/v1/users/")
			if _, ok := h.fake.users[name]; !ok {
				httpserver.WriteError(w, 404, "not_found", "user not found", nil)
				return true
			}
			httpserver.WriteJSON(w, 200, map[string]any{"username": name, "display_name": "Ada Owner", "roles": h.fake.users[name], "source": "local", "created_at": time.Now().UTC()})
		case r.URL.Path == "/v1/users" && r.Method == http.MethodGet:
			httpserver.WriteJSON(w, 200, map[string]any{"users": []map[string]any{
				{"username": "ada", "roles": []string{"admin"}, "source": "local", "created_at": time.Now().UTC()},
				{"username": "lee", "display_name": "Lee Locked", "roles": []string{"analyst"}, "source": "local", "disabled": true, "created_at": time.Now().UTC()},
				{"username": "oli", "roles": []string{"analyst"}, "source": "oidc", "created_at": time.Now().UTC()},
			}})
		default:
			return false
		}
		return true
	}
	return seen
}

func TestAnalystPages(t *testing.T) {
	h := newHarness(t)
	seen := investigationFake(h)
	b := h.browser(t)
	b.signIn("ann")

	resp, page := b.do("GET", "/?period=today", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET / = %d:\n%.800s", resp.StatusCode, page)
	}
	for _, want := range []string{`id="n-events"`, `<strong class="now">7</strong>`, `5 before`, `href="/events?country=FR&amp;period=today"`,
		`class="c4"`, `data-live="/events/live?"`, `/timelines/device/dev-1?app_id=demo`, `href="/reports/threats/root?period=today"`, "platform-integrity", "France"} {
		if !strings.Contains(page, want) {
			t.Errorf("home page lacks %q", want)
		}
	}

	resp, page = b.do("GET", "/events/live?app_id=demo", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(page, "data: {") || !strings.Contains(page, `"event_id":"0193e3a0-0000-7000-8000-000000000001"`) {
		t.Errorf("GET /events/live = %d %q:\n%.300s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
	}
	resp, page = b.do("GET", "/events?period=7d&device_id=dev-1&session_id=sess-1", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "Pixel 8") || !strings.Contains(page, "/timelines/session/sess-1") {
		t.Fatalf("GET /events = %d:\n%.800s", resp.StatusCode, page)
	}
	found := false
	for _, q := range *seen {
		if strings.HasPrefix(q, "/v1/events?") && strings.Contains(q, "device_id=dev-1") && strings.Contains(q, "session_id=sess-1") {
			found = true
		}
	}
	if !found {
		t.Errorf("the filters did not reach the API: %v", *seen)
	}
	if resp, _ := b.do("GET", "/events?device_id=%3Cscript%3E", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad device id = %d, want 400", resp.StatusCode)
	}
	if resp, _ := b.do("GET", "/events?period=forever", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad period = %d, want 400", resp.StatusCode)
	}

	resp, body := b.do("GET", "/events/export.csv?period=today&user_id=alice-raw", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("export = %d %s", resp.StatusCode, body)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("export: %v, %d rows:\n%s", err, len(rows), body)
	}
	if rows[2][1] != `'=HYPERLINK("x")` || rows[2][6] != "'+dev" {
		t.Errorf("export row %q: formulas not neutralised", rows[2])
	}
	h.fake.mu.Lock()
	var audited bool
	for _, rec := range h.fake.posted {
		if rec.Action == "ui.events_export" && rec.ActorToken == "ann" {
			audited = true
			if strings.Contains(string(rec.Body), "alice-raw") {
				t.Errorf("the export's audit record holds the raw user id: %s", rec.Body)
			}
		}
	}
	h.fake.mu.Unlock()
	if !audited {
		t.Error("the export was not audited")
	}

	resp, page = b.do("GET", "/timelines/device/dev-1?app_id=demo", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "Device timeline") || !strings.Contains(page, `class="threat"`) {
		t.Errorf("timeline = %d:\n%.600s", resp.StatusCode, page)
	}
	if resp, _ := b.do("GET", "/timelines/planet/x", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown timeline kind = %d, want 404", resp.StatusCode)
	}
	resp, page = b.do("GET", "/reports/threats/root?period=7d", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "50.0 %") || !strings.Contains(page, `href="/events?country=FR&amp;period=7d&amp;threat=root"`) {
		t.Errorf("report = %d:\n%.800s", resp.StatusCode, page)
	}
	resp, page = b.do("GET", "/reports/categories/platform-integrity?period=7d", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `href="/reports/threats/root?period=7d"`) || !strings.Contains(page, "/events?category=platform-integrity") {
		t.Errorf("category report = %d:\n%.800s", resp.StatusCode, page)
	}
	if resp, _ := b.do("GET", "/reports/categories/astrology", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown category = %d, want 404", resp.StatusCode)
	}
	if resp, _ := b.do("GET", "/users", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an analyst opens /users: %d, want 403", resp.StatusCode)
	}
}

func TestPeoplePages_Roles(t *testing.T) {
	h := newHarness(t)
	investigationFake(h)
	b := h.browser(t)
	b.signIn("uma")
	resp, _ := b.do("GET", "/", nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/users" {
		t.Errorf("a User Administrator's home = %d to %q, want /users", resp.StatusCode, loc)
	}
	for _, p := range []string{"/dashboards", "/events", "/tokens", "/audit"} {
		if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a User Administrator opens %s: %d, want 403", p, resp.StatusCode)
		}
	}
	resp, page := b.do("GET", "/users?status=locked", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "Lee Locked") || strings.Contains(page, `data-username="ada"`) {
		t.Fatalf("GET /users?status=locked = %d:\n%.800s", resp.StatusCode, page)
	}
	_, page = b.do("GET", "/users?sort=username&dir=desc", nil)
	if strings.Index(page, `data-username="oli"`) > strings.Index(page, `data-username="ada"`) {
		t.Error("sorting by username, descending: oli is not before ada")
	}
	if !strings.Contains(page, "Identity provider (OIDC)") || strings.Contains(page, `id="new-role-admin"`) {
		t.Error("the Users page shows no provider, or offers a User Administrator the Account Owner role")
	}
	if _, nav := b.do("GET", "/profile", nil); !strings.Contains(nav, `href="/users"`) || strings.Contains(nav, `href="/dashboards"`) {
		t.Error("a User Administrator's navigation is not people only")
	}
}

// TestAnalystPages_NoRenderer: without a visual renderer the home page
// still shows (with the navigation and a note), the others say why.
func TestAnalystPages_NoRenderer(t *testing.T) {
	h := newHarness(t)
	h.srv.deps.Renderer.Client = nil
	b := h.browser(t)
	b.signIn("ann")
	resp, page := b.do("GET", "/", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `nav aria-label="Main"`) || !strings.Contains(page, "No visual renderer") {
		t.Errorf("GET / without a renderer = %d:\n%.600s", resp.StatusCode, page)
	}
	if resp, _ := b.do("GET", "/events", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /events without a renderer = %d, want 503", resp.StatusCode)
	}
}
