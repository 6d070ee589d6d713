package visualrenderer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
	"threatview/visualrenderer"
	"threatview/visualrenderer/httpapi"
	"threatview/visualrenderer/postgres"
)

// sent is one event the test posts and what it should count as.
type sent struct {
	app      int // 0 or 1
	at       time.Time
	country  string
	ip       string // a test-database address of that country
	make     string
	model    string
	os       string
	threats  string   // the JSON array posted
	sighting []string // the distinct threat types it counts as
}

// Addresses the collector's test GeoIP database places in a country.
var ips = map[string]string{"FR": "2.16.1.10", "US": "3.0.1.10", "GB": "5.62.1.10", "JP": "14.0.1.10", "DE": "31.0.1.10"}

// TestStats_EndToEnd posts events for two apps through the collector of the
// running stack (tokens made at the tokens service), lets the processor
// store and aggregate them, and checks that /v1/stats answers exactly what
// was posted, per app and over all apps, for every dimension and
// granularity.
func TestStats_EndToEnd(t *testing.T) {
	collectorURL := testenv.MustEnv(t, "THREATVIEW_COLLECTOR_URL")
	tokensURL := testenv.MustEnv(t, "THREATVIEW_TOKENS_URL")
	adminKey := testenv.MustEnv(t, "ADMIN_KEY")
	dbURL := testenv.MustEnv(t, "EVENTS_DATABASE_URL")

	// The events happened in a random past month, so runs rarely share
	// buckets; the checks over all apps subtract what was there before.
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	base := time.Date(1975+r.IntN(40), time.Month(1+r.IntN(12)), 1, 0, 0, 0, 0, time.UTC)
	apps := [2]string{testenv.Name("vra"), testenv.Name("vrb")}
	h := func(day, hour, min int) time.Time {
		return base.AddDate(0, 0, day).Add(time.Duration(hour)*time.Hour + time.Duration(min)*time.Minute)
	}
	events := []sent{
		{0, h(0, 1, 5), "DE", "", "Apple", "iPhone15,2", "iOS", `["root",{"type":"hooking","severity":"high"}]`, []string{"root", "hooking"}},
		{0, h(0, 1, 59), "DE", "", "Apple", "iPhone15,2", "iOS", `["root","root"]`, []string{"root"}},
		{0, h(0, 2, 0), "FR", "", "Google", "Pixel 8", "Android", `[]`, nil},
		{0, h(1, 23, 30), "US", "", "Google", "Pixel 8", "Android", `[{"type":"emulator"},"emulator"]`, []string{"emulator"}},
		{0, h(40, 0, 0), "JP", "", "Apple", "iPhone15,2", "iOS", `["debugger"]`, []string{"debugger"}},
		{1, h(0, 1, 10), "DE", "", "Samsung", "SM-S918B", "Android", `["hooking"]`, []string{"hooking"}},
		{1, h(0, 3, 0), "GB", "", "Apple", "iPhone15,2", "iOS", `["root","hooking","emulator"]`, []string{"root", "hooking", "emulator"}},
		{1, h(2, 12, 0), "GB", "", "", "", "", `[]`, nil},
		{1, h(33, 5, 0), "US", "", "Samsung", "SM-S918B", "Android", `["root"]`, []string{"root"}},
	}
	for i := range events {
		events[i].ip = ips[events[i].country]
	}

	store, err := postgres.Open(context.Background(), dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(httpapi.New(store, httpapi.NewAuth(authz.New(nil, adminKey, log), nil, nil, true, log),
		httpserver.NewRegistry(), nil, log))
	t.Cleanup(srv.Close)
	stats := func(dim string, q url.Values) visualrenderer.Stats {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/stats/"+dim+"?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var s visualrenderer.Stats
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &s) != nil {
			t.Fatalf("GET /v1/stats/%s?%s = %d %s", dim, q.Encode(), resp.StatusCode, body)
		}
		return s
	}
	type check struct {
		dim, gran string
		from, to  time.Time
	}
	var checks []check
	for _, dim := range []string{"country", "device_model", "os", "threat"} {
		checks = append(checks,
			check{dim, "hour", base, base.AddDate(0, 0, 31)},
			check{dim, "day", base, base.AddDate(0, 0, 60)},
			check{dim, "month", base, base.AddDate(0, 3, 0)})
	}
	query := func(c check, app string) url.Values {
		q := url.Values{"granularity": {c.gran}, "from": {c.from.Format(time.RFC3339)}, "to": {c.to.Format(time.RFC3339)}}
		if app != "" {
			q.Set("app_id", app)
		}
		return q
	}
	before := map[check]map[string]map[time.Time]int64{}
	for _, c := range checks {
		before[c] = series(stats(c.dim, query(c, "")))
	}

	for _, app := range apps {
		token := mustToken(t, tokensURL, adminKey, app)
		for _, e := range events {
			if apps[e.app] != app {
				continue
			}
			body := fmt.Sprintf(`{"type":"app.startup","occurred_at":%q,"app":{"id":%q},"device":{"manufacturer":%q,"model":%q,"os":%q},"threats":%s}`,
				e.at.Format(time.RFC3339), app, e.make, e.model, e.os, e.threats)
			req, _ := http.NewRequest(http.MethodPost, collectorURL+"/v1/events", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Forwarded-For", e.ip)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST event = %d %s", resp.StatusCode, b)
			}
		}
	}

	// want is what the posted events count as in c, for app (-1: both).
	want := func(c check, app int) map[string]map[time.Time]int64 {
		g := visualrenderer.Granularity(c.gran)
		out := map[string]map[time.Time]int64{}
		add := func(k string, t time.Time) {
			if out[k] == nil {
				out[k] = map[time.Time]int64{}
			}
			out[k][g.Truncate(t)]++
		}
		for _, e := range events {
			if (app >= 0 && e.app != app) || e.at.Before(c.from) || !e.at.Before(c.to) {
				continue
			}
			switch c.dim {
			case "country":
				add(e.country, e.at)
			case "device_model":
				add(trimJoin(e.make, e.model), e.at)
			case "os":
				add(e.os, e.at)
			case "threat":
				for _, th := range e.sighting {
					add(th, e.at)
				}
			}
		}
		return out
	}

	// The processor stores and aggregates within seconds.
	last := want(checks[len(checks)-1], 1)
	testenv.MustPing(t, 60*time.Second, "events aggregated", func() error {
		c := checks[len(checks)-1]
		if got := series(stats(c.dim, query(c, apps[1]))); !reflect.DeepEqual(got, last) {
			return fmt.Errorf("app %s threats so far %v, want %v", apps[1], got, last)
		}
		if got := stats("country", query(check{"country", "month", base, base.AddDate(0, 3, 0)}, apps[0])).Total; got != 5 {
			return fmt.Errorf("app %s has %d events so far, want 5", apps[0], got)
		}
		return nil
	})
	for _, c := range checks {
		for i, app := range apps {
			s := stats(c.dim, query(c, app))
			if got, w := series(s), want(c, i); !reflect.DeepEqual(got, w) {
				t.Errorf("%s per %s, app %d:\n got %v\nwant %v", c.dim, c.gran, i, got, w)
			}
			if got, w := s.Total, sum(want(c, i)); got != w {
				t.Errorf("%s per %s, app %d: total %d, want %d", c.dim, c.gran, i, got, w)
			}
		}
		// Over all apps: what was there before plus both apps' events.
		w := want(c, -1)
		for k, pts := range before[c] {
			for tt, n := range pts {
				if w[k] == nil {
					w[k] = map[time.Time]int64{}
				}
				w[k][tt] += n
			}
		}
		if got := series(stats(c.dim, query(c, ""))); !reflect.DeepEqual(got, w) {
			t.Errorf("%s per %s, all apps:\n got %v\nwant %v", c.dim, c.gran, got, w)
		}
	}
	// top keeps the largest keys, the total still counts every key.
	c := check{"threat", "month", base, base.AddDate(0, 3, 0)}
	s := stats("threat", url.Values{"app_id": {apps[1]}, "granularity": {"month"}, "from": {base.Format(time.RFC3339)},
		"to": {base.AddDate(0, 3, 0).Format(time.RFC3339)}, "top": {"1"}})
	if len(s.Series) != 1 || s.Series[0].Key != "hooking" || s.Series[0].Total != 2 || s.Total != sum(want(c, 1)) {
		t.Errorf("top=1 threats of app b = %+v, want hooking (2, first of the tie with root by key) with total %d", s, sum(want(c, 1)))
	}
}

// series turns stats into key → bucket → count.
func series(s visualrenderer.Stats) map[string]map[time.Time]int64 {
	out := map[string]map[time.Time]int64{}
	for _, ser := range s.Series {
		out[ser.Key] = map[time.Time]int64{}
		for _, p := range ser.Points {
			out[ser.Key][p.T.UTC()] = p.Count
		}
	}
	return out
}

func sum(m map[string]map[time.Time]int64) int64 {
	var n int64
	for _, pts := range m {
		for _, c := range pts {
			n += c
		}
	}
	return n
}

func trimJoin(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}

// mustToken creates an app token at the tokens service with the admin key.
func mustToken(t *testing.T, tokensURL, adminKey, app string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"app_id": app, "name": "visualrenderer test"})
	req, _ := http.NewRequest(http.MethodPost, tokensURL+"/v1/tokens", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Token string }
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&out) != nil || out.Token == "" {
		t.Fatalf("POST /v1/tokens for %s = %d", app, resp.StatusCode)
	}
	return out.Token
}
