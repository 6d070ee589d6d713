package security

import (
	"context"
	"database/sql"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations

	"threatview/migrations"
	"threatview/platform/authz"
	"threatview/platform/testenv"
)

// startRenderer runs the visual renderer's binary on a fresh, migrated
// events DB, with people signing in at identityURL, and returns its URL.
func startRenderer(t *testing.T, identityURL string) string {
	t.Helper()
	dbURL := testenv.MustPostgres(t)
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		t.Fatalf("migrate the events DB: %v", err)
	}
	return testenv.StartService(t, "./services/visualrenderer/cmd/visualrenderer", "",
		"RENDERER_DATABASE_URL="+dbURL, "RENDERER_DB_MAX_CONNS=2", "IDENTITY_SERVICE_URL="+identityURL).URL
}

// newRendererBrowser is a browser of the renderer at base (its sign-in
// form is /signin).
func newRendererBrowser(t *testing.T, base string) *uiBrowser {
	b := newUIBrowser(t, base, "")
	b.signInPath = "/signin"
	return b
}

// TestRenderer_DisabledPersonLockedOut: an analyst signed in to the visual
// renderer and then disabled at identity loses it within the access
// token's lifetime (5 minutes in production; uiTestAccessTTL here), as the
// renderer's README says: the next page's renewal is refused, so the page
// goes to the sign-in form and the cookie is cleared, and charts and API
// calls made with the cookie as it was (an <img> of a page loaded before)
// are refused once its access token expires (plus the clock skew tokens
// are allowed, authz.MaxLeeway). An analyst not disabled
// keeps every page, chart and API call past that lifetime (their session
// renews at identity), so it is identity's answer that ends the first
// one's access, not the token running out.
func TestRenderer_DisabledPersonLockedOut(t *testing.T) {
	id := startIdentityForUI(t)
	renderer := startRenderer(t, id.url)
	for _, name := range []string{"ann", "bob"} {
		id.person(t, name, "analyst")
	}
	id.person(t, "boss", "admin")
	const page, api = "/dashboards/os", "/v1/stats/os"
	signedIn := func(name string) *uiBrowser {
		t.Helper()
		b := newRendererBrowser(t, renderer)
		if resp := b.signIn(name, name+" password 1", page); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page {
			t.Fatalf("%s signs in = %d to %q, want 303 to %s", name, resp.StatusCode, resp.Header.Get("Location"), page)
		}
		if b.cookies["__Host-tv_session"] == "" {
			t.Fatalf("no __Host-tv_session cookie after %s signed in: %v", name, b.cookies)
		}
		for _, path := range []string{page, api} {
			if resp, body := b.do("GET", path, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s signed in: GET %s = %d %.300s", name, path, resp.StatusCode, body)
			}
		}
		return b
	}
	bob := signedIn("bob")
	bobSince := time.Now()
	ann := signedIn("ann")
	annCharts := newRendererBrowser(t, renderer)
	annCharts.cookies = maps.Clone(ann.cookies)

	id.disable(t, "ann", "boss")
	disabledAt := time.Now()
	var pageEnded, apiEnded time.Duration
	for pageEnded == 0 || apiEnded == 0 {
		var pageStatus, apiStatus int
		if pageEnded == 0 {
			resp, _ := ann.do("GET", page, nil)
			pageStatus = resp.StatusCode
			if pageStatus == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
				pageEnded = time.Since(disabledAt)
				if ann.cookies["__Host-tv_session"] != "" {
					t.Errorf("the page sent ann to sign in but left the session cookie")
				}
			}
		}
		if apiEnded == 0 {
			resp, _ := annCharts.do("GET", api, nil)
			if apiStatus = resp.StatusCode; apiStatus == http.StatusUnauthorized {
				apiEnded = time.Since(disabledAt)
			}
		}
		if pageEnded == 0 && time.Since(disabledAt) > uiTestAccessTTL+5*time.Second {
			t.Fatalf("ann disabled for %s: GET %s = %d, want a redirect to /signin", time.Since(disabledAt).Round(time.Second), page, pageStatus)
		}
		if apiEnded == 0 && time.Since(disabledAt) > uiTestAccessTTL+authz.MaxLeeway+5*time.Second {
			t.Fatalf("ann disabled for %s: GET %s with the earlier cookie = %d, want 401", time.Since(disabledAt).Round(time.Second), api, apiStatus)
		}
		time.Sleep(time.Second)
	}
	t.Logf("ann disabled: pages refused after %s, API calls after %s (access token lifetime %s)",
		pageEnded.Round(100*time.Millisecond), apiEnded.Round(100*time.Millisecond), uiTestAccessTTL)

	time.Sleep(time.Until(bobSince.Add(uiTestAccessTTL + time.Second)))
	for _, path := range []string{page, api} {
		if resp, _ := bob.do("GET", path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("bob, not disabled, past his first access token's life: GET %s = %d, want 200 (the session renews)", path, resp.StatusCode)
		}
	}
	if resp := newRendererBrowser(t, renderer).signIn("ann", "ann password 1", "/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a disabled person signs in to the renderer = %d, want 401", resp.StatusCode)
	}
}
