// Package investigation drives issue 39's path end to end: events with
// sessions, users, languages and locations go through the running
// collector and processor, and each is found back, exactly, through the
// renderer's search, timelines, overview, map and threat report; the raw
// user ids and the fine locations are then looked for in every store and
// log, and must be nowhere; a device and a user erased through the
// privacy service are then gone from every one of those reads.
package investigation

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// fine is a position finer than the grid; its digits must be found nowhere.
const fineLat, fineLon = "52.52137", "13.40494"

type rendered struct {
	Events []struct {
		EventID string `json:"event_id"`
		Type    string `json:"type"`
		Device  struct {
			ID       string `json:"id"`
			Language string `json:"language"`
		} `json:"device"`
		Session *struct {
			ID string `json:"id"`
		} `json:"session"`
		User *struct {
			Pseudonym string `json:"pseudonym"`
		} `json:"user"`
		Location *struct {
			Lat float64 `json:"lat"`
			Lon float64 `json:"lon"`
		} `json:"location"`
		Threats []struct {
			Type, Category string
		} `json:"threats"`
	} `json:"events"`
	NextCursor string `json:"next_cursor"`
}

func TestInvestigation_EndToEnd(t *testing.T) {
	env := e2etest.MustEnv(t)
	renderer := testenv.MustEnv(t, "THREATVIEW_RENDERER_URL")
	app := e2etest.NewApp(t, env, "inv")
	since := time.Now().UTC().Add(-time.Second)
	run := e2etest.Name("run")
	rawUser := func(i int) string { return fmt.Sprintf("raw-user-%s-%d@example.com", run, i) }

	// Six devices in one grid cell, each with its own user; device 1 shows
	// Hooks twice in one session, device 2 root_detected once, device 6 a
	// network.info event without threats.
	var events []map[string]any
	for i := 1; i <= 6; i++ {
		ev := map[string]any{
			"type": "app.startup", "event_id": e2etest.UUID(),
			"app":      map[string]any{"id": app.ID, "version": "3.1.0"},
			"device":   map[string]any{"id": fmt.Sprintf("%s-d%d", run, i), "model": "Pixel 8", "manufacturer": "Google", "os": "android", "os_version": "14.2.1", "language": "de-DE"},
			"session":  map[string]any{"id": fmt.Sprintf("%s-s%d", run, i)},
			"user":     map[string]any{"id": rawUser(i)},
			"location": map[string]any{"lat": json.Number(fineLat), "lon": json.Number(fineLon), "accuracy_m": 8},
			"threats":  []any{},
		}
		switch i {
		case 1:
			ev["threats"] = []any{"Hooks"}
			again := map[string]any{}
			for k, v := range ev {
				again[k] = v
			}
			again["event_id"] = e2etest.UUID()
			events = append(events, again)
		case 2:
			ev["threats"] = []any{map[string]any{"type": "root_detected"}}
		case 6:
			ev["type"] = "network.info"
		}
		events = append(events, ev)
	}
	body, _ := json.Marshal(map[string]any{"events": events})
	if r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, body, map[string]string{"Content-Type": "application/json"}); r.Status != http.StatusAccepted {
		t.Fatalf("POST = %d %s", r.Status, r.Body)
	}

	get := func(path string, q url.Values, out any) int {
		t.Helper()
		r := e2etest.Do(t, http.MethodGet, renderer+path+"?"+q.Encode(), env.AdminKey, nil, nil)
		if r.Status == http.StatusOK && out != nil {
			if err := json.Unmarshal(r.Body, out); err != nil {
				t.Fatalf("GET %s: %s: %v", path, r.Body, err)
			}
		}
		return r.Status
	}
	// Wait until all seven are searchable.
	var all rendered
	if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		all = rendered{}
		get("/v1/events", url.Values{"app_id": {app.ID}}, &all)
		return len(all.Events) == len(events), nil
	}); err != nil {
		t.Fatalf("search found %d of %d events", len(all.Events), len(events))
	}
	for _, e := range all.Events {
		if e.Location == nil || e.Location.Lat != 52.5 || e.Location.Lon != 13.4 || e.Session == nil || e.User == nil ||
			!strings.HasPrefix(e.User.Pseudonym, "k") || e.Device.Language != "de-DE" {
			t.Errorf("event %+v: want location 52.5,13.4, a session, a pseudonym, de-DE", e)
		}
	}

	t.Run("Search", func(t *testing.T) {
		for name, c := range map[string]struct {
			q    url.Values
			want int
		}{
			"Device":   {url.Values{"device_id": {run + "-d1"}}, 2},
			"Session":  {url.Values{"session_id": {run + "-s2"}}, 1},
			"RawUser":  {url.Values{"user_id": {rawUser(3)}}, 1},
			"Threat":   {url.Values{"threat": {"Hooks"}}, 2},
			"Category": {url.Values{"category": {"platform-integrity"}}, 1},
			"Type":     {url.Values{"type": {"network.info"}}, 1},
			"Page":     {url.Values{"limit": {"5"}}, 5},
		} {
			c.q.Set("app_id", app.ID)
			var got rendered
			if st := get("/v1/events", c.q, &got); st != 200 || len(got.Events) != c.want {
				t.Errorf("%s: GET /v1/events?%s = %d, %d events, want %d", name, c.q.Encode(), st, len(got.Events), c.want)
			}
		}
	})
	t.Run("Timelines", func(t *testing.T) {
		for _, c := range []struct {
			kind, id string
			events   int
			threats  map[string]int
		}{
			{"device", run + "-d1", 2, map[string]int{"Hooks": 2}},
			{"session", run + "-s2", 1, map[string]int{"root_detected": 1}},
			{"user", rawUser(6), 1, map[string]int{}},
		} {
			var tl struct {
				Events    int            `json:"events"`
				Threats   map[string]int `json:"threats"`
				Countries []string       `json:"countries"`
				Recent    []any          `json:"recent"`
			}
			st := get("/v1/timelines/"+c.kind+"/"+url.PathEscape(c.id), url.Values{"app_id": {app.ID}}, &tl)
			if st != 200 || tl.Events != c.events || len(tl.Recent) != c.events || fmt.Sprint(tl.Threats) != fmt.Sprint(c.threats) {
				t.Errorf("timeline %s = %d %+v, want %d events, threats %v", c.kind, st, tl, c.events, c.threats)
			}
		}
	})
	t.Run("Overview", func(t *testing.T) {
		var o map[string]any
		get("/v1/overview", url.Values{"app_id": {app.ID}}, &o)
		want := map[string]any{"events": 7.0, "threat_events": 3.0, "users": 6.0, "devices": 6.0, "apps": 1.0}
		for k, v := range want {
			if o[k] != v {
				t.Errorf("overview %s = %v, want %v (%v)", k, o[k], v, o)
			}
		}
	})
	t.Run("Map", func(t *testing.T) {
		var m struct {
			Countries []struct {
				Country         string
				Events, Devices int
			}
			Cells []struct {
				Lat, Lon        float64
				Events, Devices int
			}
		}
		get("/v1/map", url.Values{"app_id": {app.ID}}, &m)
		// The country comes from the location's cell (Berlin), not the test's loopback address.
		if len(m.Countries) != 1 || m.Countries[0].Country != "DE" || m.Countries[0].Events != 7 || m.Countries[0].Devices != 6 ||
			len(m.Cells) != 1 || m.Cells[0].Lat != 52.5 || m.Cells[0].Lon != 13.4 || m.Cells[0].Events != 7 || m.Cells[0].Devices != 6 {
			t.Errorf("map = %+v, want DE and the cell 52.5,13.4 with 7 events of 6 devices", m)
		}
		var hooks struct{ Cells []any }
		get("/v1/map", url.Values{"app_id": {app.ID}, "threat": {"Hooks"}}, &hooks)
		if len(hooks.Cells) != 0 {
			t.Errorf("map for Hooks shows cells %v: one device is below K=5", hooks.Cells)
		}
		r := e2etest.Do(t, http.MethodGet, renderer+"/v1/charts/map.svg?app_id="+app.ID, env.AdminKey, nil, nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), "7 events, 6 devices") {
			t.Errorf("map.svg = %d, want the cell's counts in it", r.Status)
		}
	})
	t.Run("ThreatReport", func(t *testing.T) {
		var rep struct {
			Category    string
			Events      int
			Devices     int
			ByOSVersion []struct {
				Key   string
				Count int
			} `json:"by_os_version"`
			Series []struct{ Count int }
		}
		get("/v1/reports/threats/Hooks", url.Values{"app_id": {app.ID}}, &rep)
		if rep.Category != "anti-dynamic-analysis" || rep.Events != 2 || rep.Devices != 1 || len(rep.ByOSVersion) != 1 ||
			rep.ByOSVersion[0].Key != "android 14.2" || rep.ByOSVersion[0].Count != 2 || len(rep.Series) != 1 || rep.Series[0].Count != 2 {
			t.Errorf("report = %+v, want 2 events of 1 device on android 14.2", rep)
		}
	})

	// Erased through the privacy service, device 1 (its two Hooks events)
	// and then user 6 (device 6's one network.info event) are gone from
	// every read: the numbers are those of the events that remain, exactly.
	t.Run("Erasure", func(t *testing.T) {
		privacyURL := testenv.MustEnv(t, "THREATVIEW_PRIVACY_URL")
		erase := func(subject map[string]any) {
			t.Helper()
			subject["app_id"] = app.ID
			b, _ := json.Marshal(subject)
			r := e2etest.Do(t, http.MethodPost, privacyURL+"/v1/erasures", env.AdminKey, b, map[string]string{"Content-Type": "application/json"})
			var e struct{ ID, Status, Error string }
			if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &e) != nil {
				t.Fatalf("POST /v1/erasures = %d %s", r.Status, r.Body)
			}
			if err := e2etest.WaitFor(90*time.Second, func() (bool, error) {
				r := e2etest.Do(t, http.MethodGet, privacyURL+"/v1/erasures/"+e.ID, env.AdminKey, nil, nil)
				if err := json.Unmarshal(r.Body, &e); err != nil {
					return false, err
				}
				return e.Status == "done" || e.Status == "failed", nil
			}); err != nil || e.Status != "done" {
				t.Fatalf("erasure %s: %s %s (%v)", e.ID, e.Status, e.Error, err)
			}
		}
		type mapped struct {
			Countries []struct {
				Country         string
				Events, Devices int
			}
			Cells []struct{ Events, Devices int }
		}
		type report struct {
			Events, Devices int
			ByOSVersion     []any `json:"by_os_version"`
			Series          []any
		}
		check := func(stage string, events, threats, users, devices int, cells bool) {
			t.Helper()
			var found rendered
			if get("/v1/events", url.Values{"app_id": {app.ID}}, &found); len(found.Events) != events {
				t.Errorf("%s: search finds %d events, want %d", stage, len(found.Events), events)
			}
			var o map[string]any
			get("/v1/overview", url.Values{"app_id": {app.ID}}, &o)
			want := map[string]any{"events": float64(events), "threat_events": float64(threats), "users": float64(users),
				"devices": float64(devices), "apps": 1.0}
			for k, v := range want {
				if o[k] != v {
					t.Errorf("%s: overview %s = %v, want %v (%v)", stage, k, o[k], v, o)
				}
			}
			var m mapped
			get("/v1/map", url.Values{"app_id": {app.ID}}, &m)
			if len(m.Countries) != 1 || m.Countries[0].Country != "DE" || m.Countries[0].Events != events || m.Countries[0].Devices != devices ||
				cells != (len(m.Cells) == 1) || cells && (m.Cells[0].Events != events || m.Cells[0].Devices != devices) {
				t.Errorf("%s: map = %+v, want DE with %d events of %d devices, a cell: %v", stage, m, events, devices, cells)
			}
			var hooks, root report
			get("/v1/reports/threats/Hooks", url.Values{"app_id": {app.ID}}, &hooks)
			get("/v1/reports/threats/root_detected", url.Values{"app_id": {app.ID}}, &root)
			if hooks.Events != 0 || hooks.Devices != 0 || len(hooks.ByOSVersion) != 0 || len(hooks.Series) != 0 {
				t.Errorf("%s: Hooks report = %+v, want nothing: its one device is erased", stage, hooks)
			}
			if root.Events != 1 || root.Devices != 1 || len(root.ByOSVersion) != 1 || len(root.Series) != 1 {
				t.Errorf("%s: root_detected report = %+v, want device 2's one event", stage, root)
			}
		}
		gone := func(stage string, q url.Values, kind, id string) {
			t.Helper()
			q.Set("app_id", app.ID)
			var found rendered
			if st := get("/v1/events", q, &found); st != http.StatusOK || len(found.Events) != 0 {
				t.Errorf("%s: GET /v1/events?%s = %d, %d events, want none", stage, q.Encode(), st, len(found.Events))
			}
			var tl struct{ Events int }
			if st := get("/v1/timelines/"+kind+"/"+url.PathEscape(id), url.Values{"app_id": {app.ID}}, &tl); st != http.StatusNotFound && (st != http.StatusOK || tl.Events != 0) {
				t.Errorf("%s: timeline %s = %d, %d events, want none", stage, kind, st, tl.Events)
			}
		}

		erase(map[string]any{"device_id": run + "-d1"})
		gone("device 1 erased", url.Values{"device_id": {run + "-d1"}}, "device", run+"-d1")
		gone("device 1 erased", url.Values{"threat": {"Hooks"}}, "session", run+"-s1")
		check("device 1 erased", 5, 1, 5, 5, true)

		erase(map[string]any{"user_id": rawUser(6)})
		gone("user 6 erased", url.Values{"user_id": {rawUser(6)}}, "user", rawUser(6))
		gone("user 6 erased", url.Values{"type": {"network.info"}}, "device", run+"-d6")
		// Four devices are below K = 5: the cell is no longer shown.
		check("user 6 erased", 4, 1, 4, 4, false)
	})

	t.Run("NowhereRaw", func(t *testing.T) {
		needles := []string{fineLat, fineLon, "52.521", "13.404"}
		for i := 1; i <= 6; i++ {
			needles = append(needles, rawUser(i))
		}
		ctx := context.Background()
		pool := e2etest.Events(t, env)
		for _, q := range []string{
			`SELECT e::text FROM events.events e WHERE app_id = $1`,
			`SELECT f::text FROM facts.facts f WHERE app_id = $1`,
			`SELECT r::text FROM facts.inv_device_days r WHERE app_id = $1`,
			`SELECT r::text FROM facts.inv_geo_daily r WHERE app_id = $1`,
			`SELECT r::text FROM facts.inv_daily_users r WHERE app_id = $1`,
		} {
			rows, err := pool.Query(ctx, q, app.ID)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				for _, n := range needles {
					if strings.Contains(s, n) {
						t.Errorf("%s holds %q: %s", q, n, s)
					}
				}
			}
			rows.Close()
		}
		db := e2etest.MariaDB(t, env.AuditDSN)
		audited := testenv.AuditRowsSince(t, db, since)
		for _, s := range audited {
			for _, needle := range needles {
				if strings.Contains(s, needle) {
					t.Errorf("an audit row holds %q: %s", needle, s)
				}
			}
		}
		n := len(audited)
		if n == 0 {
			t.Error("no audit rows since the test began: the search audits are missing")
		}
		logs, _ := filepath.Glob(filepath.Join(logDir(), "*.log"))
		if len(logs) == 0 {
			t.Fatalf("no logs under %s", logDir())
		}
		for _, f := range logs {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, needle := range needles[4:] { // the raw ids; coordinates may match unrelated numbers in logs
				if strings.Contains(string(b), needle) {
					t.Errorf("%s holds %q", f, needle)
				}
			}
			if strings.Contains(string(b), fineLat+",") || strings.Contains(string(b), `"lat":`+fineLat) {
				t.Errorf("%s holds the fine location", f)
			}
		}
	})
}

// logDir is the local stack's log directory (.run/log at the repository root).
func logDir() string {
	if d := os.Getenv("THREATVIEW_LOG_DIR"); d != "" {
		return d
	}
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".run", "log")); err == nil {
			return filepath.Join(d, ".run", "log")
		}
	}
	return filepath.Join(dir, "..", "..", ".run", "log")
}
