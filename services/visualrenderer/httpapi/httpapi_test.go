package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/visualrenderer"
	"threatview/visualrenderer/httpapi"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

const adminKey = "test-admin-key"

// mustServer serves the renderer over a fresh DB seeded with synthetic
// events for apps a and b over the last 40 days. It takes the admin key;
// people sign in through the identity service when withIdentity.
func mustServer(t *testing.T, withIdentity ...bool) (*httptest.Server, int) {
	t.Helper()
	url, pool := rtest.MustEventsDB(t)
	to := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	n := rtest.Seed(t, pool, rtest.Synthetic{Apps: []string{"a", "b"}, From: to.AddDate(0, 0, -40), To: to, MaxPerHour: 3})
	store, err := postgres.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var auth *httpapi.Auth
	if len(withIdentity) > 0 && withIdentity[0] {
		idURL, _ := rtest.MustIdentity(t)
		auth = httpapi.NewIdentityAuth(idURL, "", adminKey, true, log)
	} else {
		auth = httpapi.NewAuth(authz.New(nil, adminKey, log), nil, nil, true, log)
	}
	srv := httptest.NewServer(httpapi.New(store, auth, httpserver.NewRegistry(), map[string]httpserver.Check{"database": store.Ping}, log))
	t.Cleanup(srv.Close)
	return srv, n
}

func get(t *testing.T, srv *httptest.Server, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

var bearer = []string{"Authorization", "Bearer " + adminKey}

func TestStats(t *testing.T) {
	srv, events := mustServer(t)
	from := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -60).Format(time.RFC3339)
	to := time.Now().UTC().AddDate(0, 0, 1).Format(time.RFC3339)

	t.Run("OK", func(t *testing.T) {
		total := int64(0)
		for _, app := range []string{"a", "b"} {
			resp, body := get(t, srv, "/v1/stats/country?granularity=day&app_id="+app+"&from="+from+"&to="+to, bearer...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET stats = %d %s", resp.StatusCode, body)
			}
			var s visualrenderer.Stats
			if err := json.Unmarshal(body, &s); err != nil {
				t.Fatal(err)
			}
			total += s.Total
		}
		if total != int64(events) {
			t.Fatalf("apps a and b total %d events, want %d seeded", total, events)
		}
		_, body := get(t, srv, "/v1/stats/os?granularity=month&top=1&from="+from+"&to="+to, bearer...)
		var raw map[string]any
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"dimension", "granularity", "from", "to", "total", "series"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("answer %s lacks %q", body, k)
			}
		}
		if n := len(raw["series"].([]any)); n != 1 {
			t.Errorf("top=1 gave %d series", n)
		}
	})

	bad := []struct{ name, path string }{
		{"UnknownDimension", "/v1/stats/city"},
		{"BadFrom", "/v1/stats/country?from=monday"},
		{"FromAfterTo", "/v1/stats/country?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z"},
		{"TooLarge", "/v1/stats/country?granularity=hour&from=2025-01-01T00:00:00Z&to=2026-01-01T00:00:00Z"},
		{"BadTop", "/v1/stats/os?top=-1"},
		{"ChartTooWide", "/v1/charts/country.svg?width=99999"},
		{"ChartBadKind", "/v1/charts/country.png?kind=pie"},
		{"ChartBadRange", "/v1/charts/country.png?granularity=hour&from=2025-01-01T00:00:00Z&to=2026-01-01T00:00:00Z"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, srv, tc.path, bearer...)
			var e httpserver.ErrorBody
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Code != "invalid_query" || e.Error.Message == "" {
				t.Fatalf("GET %s = %d %s, want 400 invalid_query", tc.path, resp.StatusCode, body)
			}
		})
	}

	// An answer holds at most MaxPoints points (keys × buckets): 1000 keys
	// over 744 hours would be 744,000.
	for _, p := range []string{"/v1/stats/country", "/v1/charts/country.svg", "/v1/charts/country.png"} {
		t.Run("TooManyPoints"+p, func(t *testing.T) {
			resp, body := get(t, srv, p+"?granularity=hour&top=1000&from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z", bearer...)
			var e httpserver.ErrorBody
			if resp.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal(body, &e) != nil || e.Error.Code != "too_many_points" ||
				!strings.Contains(e.Error.Message, "top=134") {
				t.Fatalf("GET %s with top=1000 hourly for 31 days = %d %s, want 422 too_many_points naming top=134", p, resp.StatusCode, body)
			}
		})
	}

	auth := []struct {
		name string
		hdr  []string
		want int
	}{
		{"NoCredential", nil, http.StatusUnauthorized},
		{"WrongKey", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"BadJWT", []string{"Authorization", "Bearer a.b.c"}, http.StatusUnauthorized},
		{"ForgedCookie", []string{"Cookie", "__Host-tv_session=eyJhIjoieC55LnoifQ"}, http.StatusUnauthorized},
	}
	for _, tc := range auth {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []string{"/v1/stats/country", "/v1/charts/os.svg"} {
				resp, body := get(t, srv, p, tc.hdr...)
				if resp.StatusCode != tc.want || !strings.Contains(string(body), `"unauthorized"`) {
					t.Fatalf("GET %s = %d %s, want %d", p, resp.StatusCode, body, tc.want)
				}
			}
		})
	}
}

func TestCharts(t *testing.T) {
	srv, _ := mustServer(t)
	for _, tc := range []struct{ path string }{
		{"/v1/charts/country.svg?width=800&height=400"},
		{"/v1/charts/threat.svg?kind=bar&width=640&height=480&app_id=a"},
		{"/v1/charts/os.svg?kind=total&granularity=hour&width=1000&height=300"},
		{"/v1/charts/device_model.svg?app_id=nobody"},
	} {
		t.Run("SVG"+tc.path, func(t *testing.T) {
			resp, body := get(t, srv, tc.path, bearer...)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
				t.Fatalf("GET %s = %d %s %.200s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var doc struct {
				XMLName xml.Name
				Width   string `xml:"width,attr"`
				Height  string `xml:"height,attr"`
			}
			if err := xml.Unmarshal(body, &doc); err != nil {
				t.Fatalf("chart is not XML: %v", err)
			}
			u, _ := url.Parse(tc.path)
			w, h := u.Query().Get("width"), u.Query().Get("height")
			if w == "" {
				w, h = "800", "400"
			}
			if doc.XMLName.Local != "svg" || doc.Width != w || doc.Height != h {
				t.Fatalf("root <%s width=%q height=%q>, want <svg width=%q height=%q>", doc.XMLName.Local, doc.Width, doc.Height, w, h)
			}
			if !bytes.Contains(body, []byte("Time (UTC)")) && !bytes.Contains(body, []byte("sightings")) {
				t.Errorf("chart has no axis label")
			}
		})
	}
	for _, tc := range []struct {
		path string
		w, h int
	}{
		{"/v1/charts/country.png", 800, 400},
		{"/v1/charts/threat.png?kind=bar&width=333&height=222", 333, 222},
		{"/v1/charts/os.png?granularity=month&width=1280&height=720", 1280, 720},
	} {
		t.Run("PNG"+tc.path, func(t *testing.T) {
			resp, body := get(t, srv, tc.path, bearer...)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
				t.Fatalf("GET %s = %d %s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			img, err := png.Decode(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("decode PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
				t.Fatalf("PNG is %dx%d, want %dx%d", b.Dx(), b.Dy(), tc.w, tc.h)
			}
		})
	}
	t.Run("UnknownFormat", func(t *testing.T) {
		if resp, body := get(t, srv, "/v1/charts/country.gif", bearer...); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET .gif = %d %s, want 404", resp.StatusCode, body)
		}
	})
}

// cookies returns the Set-Cookie values of resp by name.
func cookies(resp *http.Response) map[string]string {
	out := map[string]string{}
	for _, c := range resp.Cookies() {
		out[c.Name] = c.Value
	}
	return out
}

// TestSignIn: people sign in to the dashboards with their username and
// password at identity; the admin key is for automation only and no form
// takes it. The session cookie is __Host- prefixed, HttpOnly, Secure and
// SameSite=Lax, and only a local path is a target after sign-in.
func TestSignIn(t *testing.T) {
	srv, _ := mustServer(t, true)
	idURL, idKey := rtest.MustIdentity(t)
	analyst, analystPW := rtest.MustPerson(t, idURL, idKey, "analyst")
	auditor, auditorPW := rtest.MustPerson(t, idURL, idKey, "auditor")
	resp, _ := get(t, srv, "/?app_id=a")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next=%2F%3Fapp_id%3Da" {
		t.Fatalf("GET / without a session = %d to %q, want 303 to the sign-in form", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := get(t, srv, "/signin?next=/dashboards/os")
	csrf := cookies(resp)["__Host-tv_csrf"]
	if resp.StatusCode != http.StatusOK || csrf == "" || !strings.Contains(string(body), `value="`+csrf+`"`) {
		t.Fatalf("GET /signin = %d, csrf cookie %q in form: %v", resp.StatusCode, csrf, strings.Contains(string(body), csrf))
	}
	if strings.Contains(string(body), "Admin key") || !strings.Contains(string(body), `name="username"`) {
		t.Fatalf("the sign-in form asks for the admin key or no username:\n%s", body)
	}
	post := func(path string, form url.Values, cookie string, hdr ...string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	csrfCookie := "__Host-tv_csrf=" + csrf
	form := func(user, pw, next string) url.Values {
		return url.Values{"username": {user}, "password": {pw}, "csrf": {csrf}, "next": {next}}
	}
	t.Run("NoCSRFCookie", func(t *testing.T) {
		if r := post("/signin", form(analyst, analystPW, "/"), ""); r.StatusCode != http.StatusForbidden || cookies(r)["__Host-tv_session"] != "" {
			t.Fatalf("POST without the CSRF cookie = %d; want 403 and no session", r.StatusCode)
		}
	})
	t.Run("CrossOrigin", func(t *testing.T) {
		if r := post("/signin", form(analyst, analystPW, "/"), csrfCookie, "Sec-Fetch-Site", "cross-site"); r.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-site POST = %d, want 403", r.StatusCode)
		}
	})
	t.Run("AdminKeyIsNoPassword", func(t *testing.T) {
		f := url.Values{"key": {adminKey}, "csrf": {csrf}}
		if r := post("/signin", f, csrfCookie); r.StatusCode == http.StatusSeeOther || cookies(r)["__Host-tv_session"] != "" {
			t.Fatalf("POST with the admin key = %d, want a refusal and no session", r.StatusCode)
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		if r := post("/signin", form(analyst, "wrong-password-123", "/"), csrfCookie); r.StatusCode != http.StatusUnauthorized || cookies(r)["__Host-tv_session"] != "" {
			t.Fatalf("POST with a wrong password = %d, want 401 and no session", r.StatusCode)
		}
	})
	t.Run("RoleMissing", func(t *testing.T) {
		if r := post("/signin", form(auditor, auditorPW, "/"), csrfCookie); r.StatusCode != http.StatusForbidden || cookies(r)["__Host-tv_session"] != "" {
			t.Fatalf("POST as an auditor = %d, want 403 and no session", r.StatusCode)
		}
	})
	t.Run("OK", func(t *testing.T) {
		r := post("/signin", form(analyst, analystPW, "/dashboards/os"), csrfCookie)
		var session *http.Cookie
		for _, c := range r.Cookies() {
			if c.Name == "__Host-tv_session" {
				session = c
			}
		}
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/dashboards/os" || session == nil {
			t.Fatalf("POST /signin = %d to %q, session %v", r.StatusCode, r.Header.Get("Location"), session)
		}
		if !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteLaxMode || session.Path != "/" || session.Domain != "" ||
			session.MaxAge <= 0 || session.MaxAge > 24*3600 {
			t.Errorf("session cookie %+v, want HttpOnly, Secure, Lax, path /, no domain, bounded Max-Age", session)
		}
		ck := "__Host-tv_session=" + session.Value + "; " + csrfCookie
		for _, p := range []string{"/?app_id=a&range=7d", "/dashboards/os", "/dashboards/threat?range=12mo", "/v1/charts/os.svg", "/v1/stats/os"} {
			resp, body := get(t, srv, p, "Cookie", ck)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s with the session = %d %.300s", p, resp.StatusCode, body)
			}
			if c := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(p, "/v1/") && (strings.Contains(c, "unsafe-inline") || !strings.Contains(c, "default-src 'none'")) {
				t.Errorf("GET %s CSP %q", p, c)
			}
		}
		resp, body := get(t, srv, "/?range=forever", "Cookie", ck)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "unknown range") {
			t.Fatalf("GET /?range=forever = %d, want 400 naming the range", resp.StatusCode)
		}
	})
	// Item: the renderer's sign-in took next=/\t/evil.example, which a
	// browser reads as //evil.example.
	t.Run("OpenRedirect", func(t *testing.T) {
		for _, next := range []string{"//evil.example/", "/\t/evil.example", "/\\evil.example", "/%09/evil.example", "/%5Cevil.example",
			"https://evil.example/", "/\r\n/evil.example", "javascript:alert(1)", "\t//evil.example", "/%2F%2Fevil.example"} {
			r := post("/signin", form(analyst, analystPW, next), csrfCookie)
			if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
				t.Errorf("next=%q redirected (%d) to %q, want /", next, r.StatusCode, r.Header.Get("Location"))
			}
		}
	})
}
