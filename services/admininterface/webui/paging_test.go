package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"threatview/admininterface/upstream"
	"threatview/platform/wire"
)

// addTokens gives the fake tokens service n tokens of app, named name-i.
func (f *fakeServices) addTokens(app string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("00000000-0000-4000-9000-%012d", len(f.tokens)+1)
		f.tokens = append(f.tokens, upstream.NewToken{Token: upstream.Token{ID: id, AppID: app,
			Name: fmt.Sprintf("%s-%d", app, i), Active: true, CreatedAt: time.Now()}})
	}
}

var appLinkRe = regexp.MustCompile(`<a href="/tokens/apps/([^"]+)">`)

// appsShown lists the apps the page links to, in order.
func appsShown(page string) []string {
	var out []string
	for _, m := range appLinkRe.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestServer_AppsPaging(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 60; i++ {
		h.fake.addTokens(fmt.Sprintf("app-%03d", i), 1)
	}
	h.fake.addTokens("shop-app-1", 2)
	b := h.browser(t)
	b.signIn("ada")

	t.Run("first page", func(t *testing.T) {
		resp, page := b.do("GET", "/tokens", nil)
		apps := appsShown(page)
		if resp.StatusCode != 200 || len(apps) != appsPerPage || apps[0] != "app-000" || apps[24] != "app-024" {
			t.Fatalf("GET /tokens = %d, apps %v; want app-000…app-024", resp.StatusCode, apps)
		}
		for _, want := range []string{"61 apps; showing 1–25 (page 1 of 3).", `href="/tokens?page=2" rel="next"`} {
			if !strings.Contains(page, want) {
				t.Errorf("the first page lacks %q", want)
			}
		}
		if strings.Contains(page, `rel="prev"`) || strings.Contains(page, "app-025") {
			t.Errorf("the first page has a Previous link or the second page's apps")
		}
	})
	t.Run("next and last page", func(t *testing.T) {
		_, page := b.do("GET", "/tokens?page=2", nil)
		if apps := appsShown(page); len(apps) != 25 || apps[0] != "app-025" {
			t.Fatalf("page 2 shows %v", apps)
		}
		if !strings.Contains(page, `href="/tokens" rel="prev"`) || !strings.Contains(page, `href="/tokens?page=3" rel="next"`) {
			t.Errorf("page 2 lacks its Previous/Next links")
		}
		_, page = b.do("GET", "/tokens?page=3", nil)
		if apps := appsShown(page); len(apps) != 11 || apps[10] != "shop-app-1" || strings.Contains(page, `rel="next"`) {
			t.Errorf("page 3 shows %v (and a Next link: %v)", apps, strings.Contains(page, `rel="next"`))
		}
		// A page past the end (the list shrank since the link was made)
		// shows the last page.
		resp, page := b.do("GET", "/tokens?page=99", nil)
		if apps := appsShown(page); resp.StatusCode != 200 || len(apps) != 11 || !strings.Contains(page, "page 3 of 3") {
			t.Errorf("page 99 = %d, %v; want the last page", resp.StatusCode, apps)
		}
	})
	t.Run("filter", func(t *testing.T) {
		resp, page := b.do("GET", "/tokens?q=APP-01", nil)
		apps := appsShown(page)
		if resp.StatusCode != 200 || len(apps) != 10 || apps[0] != "app-010" || apps[9] != "app-019" {
			t.Fatalf("filter APP-01 = %d, %v; want app-010…app-019", resp.StatusCode, apps)
		}
		if !strings.Contains(page, "10 of 61 apps match “APP-01”.") || !strings.Contains(page, `value="APP-01"`) {
			t.Errorf("the filtered page does not count the matches or keep the filter in its box")
		}
		// Substring, prefix matches first; the links keep the filter.
		_, page = b.do("GET", "/tokens?q=app-", nil)
		if apps := appsShown(page); len(apps) != 25 || apps[0] != "app-000" {
			t.Errorf("filter app- shows %v", apps)
		}
		if !strings.Contains(page, `href="/tokens?page=2&amp;q=app-" rel="next"`) {
			t.Errorf("the Next link of a filtered list does not keep the filter")
		}
		_, page = b.do("GET", "/tokens?page=3&q=app-", nil)
		if apps := appsShown(page); len(apps) != 11 || apps[10] != "shop-app-1" ||
			!strings.Contains(page, `href="/tokens?page=2&amp;q=app-" rel="prev"`) {
			t.Errorf("page 3 of filter app- shows %v", apps)
		}
	})
	t.Run("empty result", func(t *testing.T) {
		resp, page := b.do("GET", "/tokens?q=nothing-like-this", nil)
		if resp.StatusCode != 200 || len(appsShown(page)) != 0 || !strings.Contains(page, "No app matches “nothing-like-this”.") ||
			!strings.Contains(page, "0 of 61 apps match") || strings.Contains(page, `rel="next"`) {
			t.Errorf("an empty result = %d:\n%s", resp.StatusCode, page)
		}
	})
	t.Run("bad parameters", func(t *testing.T) {
		for _, q := range []string{"page=0", "page=-1", "page=two", "page=1.5", "page=99999999999", "q=" + url.QueryEscape("a b"),
			"q=" + url.QueryEscape("<script>"), "q=" + strings.Repeat("a", 65)} {
			resp, page := b.do("GET", "/tokens?"+q, nil)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "must be") && !strings.Contains(page, "is part of an app id") {
				t.Errorf("GET /tokens?%s = %d, want 400 with the reason", q, resp.StatusCode)
			}
		}
		// A client other than a browser gets the JSON error.
		req, _ := http.NewRequest("GET", b.base+"/tokens?page=x", nil)
		resp, err := b.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Error.Code != "invalid" || !strings.Contains(e.Error.Message, "whole number") {
			t.Errorf("GET /tokens?page=x as JSON = %d %+v", resp.StatusCode, e)
		}
	})
}

// The apps list counts the newest 1,000 tokens (the tokens service's
// maximum); an app with only older tokens is still found by its whole id.
func TestServer_AppsFilterFindsOldApp(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 10; i++ {
		h.fake.addTokens(fmt.Sprintf("busy-%d", i), 100)
	}
	h.fake.addTokens("quiet-app", 1) // past the first 1,000
	b := h.browser(t)
	b.signIn("ada")
	_, page := b.do("GET", "/tokens", nil)
	if !strings.Contains(page, "10 apps.") || !strings.Contains(page, "Only the newest 1000 tokens are counted") {
		t.Errorf("the unfiltered list does not say it counted the newest 1000 tokens")
	}
	_, page = b.do("GET", "/tokens?q=quiet-app", nil)
	if apps := appsShown(page); len(apps) != 1 || apps[0] != "quiet-app" {
		t.Errorf("filter on the whole id quiet-app shows %v", apps)
	}
}

var tokenRowRe = regexp.MustCompile(`<td><code>([0-9a-f-]{36})</code></td>`)

func TestServer_AppPage(t *testing.T) {
	h := newHarness(t)
	h.fake.addTokens("shop-app", 60)
	h.fake.addTokens("other-app", 1)
	b := h.browser(t)
	csrf := b.signIn("ada")

	resp, page := b.do("GET", "/tokens/apps/shop-app", nil)
	rows := tokenRowRe.FindAllStringSubmatch(page, -1)
	if resp.StatusCode != 200 || len(rows) != appTokensPerPage || !strings.Contains(page, "60 tokens, newest first; showing 1–50 (page 1 of 2).") ||
		!strings.Contains(page, `href="/tokens/apps/shop-app?page=2" rel="next"`) || strings.Contains(page, "other-app") {
		t.Fatalf("GET /tokens/apps/shop-app = %d with %d tokens:\n%.2000s", resp.StatusCode, len(rows), page)
	}
	_, page = b.do("GET", "/tokens/apps/shop-app?page=2", nil)
	if rows := tokenRowRe.FindAllStringSubmatch(page, -1); len(rows) != 10 || !strings.Contains(page, `href="/tokens/apps/shop-app" rel="prev"`) {
		t.Errorf("page 2 of shop-app has %d tokens", len(rows))
	}
	for path, want := range map[string]int{
		"/tokens/apps/no-such-app": 404, "/tokens/apps/bad%20app": 404, "/tokens/apps/shop-app?page=0": 400,
		"/tokens/apps/shop-app?page=x": 400, "/tokens/apps/shop-app?page=9": 200,
	} {
		if resp, _ := b.do("GET", path, nil); resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	// Revoking from the app's page comes back to it.
	id := h.fake.tokens[0].ID
	_, page = b.do("GET", "/tokens/"+id+"/revoke", nil)
	if !strings.Contains(page, `name="app" value="shop-app"`) || !strings.Contains(page, `href="/tokens/apps/shop-app">Cancel`) {
		t.Errorf("the revoke confirmation does not lead back to the app")
	}
	resp, _ = b.do("POST", "/tokens/"+id+"/revoke", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "app": {"shop-app"}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/tokens/apps/shop-app?done=revoked" || h.fake.tokens[0].Active {
		t.Errorf("revoke = %d to %q (active %v), want 303 to the app's page", resp.StatusCode, loc, h.fake.tokens[0].Active)
	}
	_, page = b.do("GET", "/tokens/apps/shop-app?done=revoked", nil)
	if !strings.Contains(page, `class="flash"`) || !strings.Contains(page, "59") {
		t.Errorf("the app's page after revoking has no flash or wrong counts")
	}
	// A forged app field cannot redirect elsewhere.
	resp, _ = b.do("POST", "/tokens/"+h.fake.tokens[1].ID+"/revoke", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "app": {"//evil.example"}})
	if loc := resp.Header.Get("Location"); loc != "/tokens?done=revoked" {
		t.Errorf("revoke with app //evil.example redirects to %q", loc)
	}
}

var dlqRowRe = regexp.MustCompile(`/dlq/(events|audit)/message\?id=`)

// TestServer_DLQPaging lists a dead-letter queue of 30 messages (real
// broker) 25 at a time, each queue with its own page parameter.
func TestServer_DLQPaging(t *testing.T) {
	h := newHarness(t)
	pub, events, audit := withBroker(t, h)
	for i := 0; i < 30; i++ {
		if err := pub.Send(context.Background(), wire.DeadLetter(events), []byte(fmt.Sprintf(`{"n":%d}`, i)),
			map[string]string{wire.HeaderDeadLetterReason: fmt.Sprintf("reason-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Send(context.Background(), wire.DeadLetter(audit), []byte(`{}`), map[string]string{wire.HeaderDeadLetterReason: "audit-reason"}); err != nil {
		t.Fatal(err)
	}
	b := h.browser(t)
	b.signIn("ada")
	count := func(page, key string) int {
		n := 0
		for _, m := range dlqRowRe.FindAllStringSubmatch(page, -1) {
			if m[1] == key {
				n++
			}
		}
		return n
	}

	resp, page := b.do("GET", "/dlq", nil)
	if resp.StatusCode != 200 || count(page, "events") != 25 || count(page, "audit") != 1 ||
		!strings.Contains(page, "30 messages; showing 1–25 (page 1 of 2).") || !strings.Contains(page, "reason-00") ||
		strings.Contains(page, "reason-25") || !strings.Contains(page, `href="/dlq?events_page=2" rel="next"`) {
		t.Fatalf("GET /dlq = %d, events %d, audit %d:\n%.3000s", resp.StatusCode, count(page, "events"), count(page, "audit"), page)
	}
	_, page = b.do("GET", "/dlq?events_page=2", nil)
	if count(page, "events") != 5 || !strings.Contains(page, "reason-29") || strings.Contains(page, "reason-24") ||
		!strings.Contains(page, "showing 26–30 (page 2 of 2)") || !strings.Contains(page, `href="/dlq" rel="prev"`) {
		t.Errorf("page 2 of the events DLQ: %d messages", count(page, "events"))
	}
	// Past the end: the last page. The other queue's page is kept in links.
	_, page = b.do("GET", "/dlq?events_page=7&audit_page=1", nil)
	if count(page, "events") != 5 || !strings.Contains(page, "page 2 of 2") {
		t.Errorf("events_page=7 shows %d messages, want the last page's 5", count(page, "events"))
	}
	for _, q := range []string{"events_page=0", "events_page=x", "audit_page=-2"} {
		if resp, page := b.do("GET", "/dlq?"+q, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "whole number") {
			t.Errorf("GET /dlq?%s = %d, want 400", q, resp.StatusCode)
		}
	}
}
