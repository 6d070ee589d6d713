package contract

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// TestConformance_VisualRenderer validates the stats API's and the charts'
// real answers against api/visualrenderer.openapi.json.
func TestConformance_VisualRenderer(t *testing.T) {
	env := e2etest.MustEnv(t)
	c := newCaller(t, "visualrenderer", testenv.MustEnv(t, "THREATVIEW_RENDERER_URL"))
	demoApp := testenv.MustEnv(t, "THREATVIEW_DEMO_APP")
	c.ops()
	for _, tc := range []struct {
		valid  bool
		path   string
		key    string
		status int
	}{
		{true, "/v1/stats/country?granularity=day&top=3", env.AdminKey, 200},
		{true, "/v1/stats/threat?granularity=month&app_id=" + demoApp, env.AdminKey, 200},
		{true, "/v1/stats/os?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z&granularity=hour", env.AdminKey, 200},
		{false, "/v1/stats/country?granularity=week", env.AdminKey, 400},
		{false, "/v1/stats/colour", env.AdminKey, 400},
		{true, "/v1/stats/os?granularity=hour&from=2000-01-01T00:00:00Z", env.AdminKey, 400},
		{false, "/v1/stats/country", "", 401},
		{true, "/v1/stats/country", "wrong-key", 401},
		{true, "/v1/charts/country.svg?kind=bar", env.AdminKey, 200},
		{true, "/v1/charts/os.png?width=400&height=300", env.AdminKey, 200},
		{false, "/v1/charts/country.gif", env.AdminKey, 404},
		// The investigation read API (issue 39).
		{true, "/v1/events?limit=5&app_id=" + demoApp, env.AdminKey, 200},
		{true, "/v1/events?threat=Hooks&category=anti-dynamic-analysis", env.AdminKey, 200},
		{true, "/v1/events?device_id=contract-device", env.AdminKey, 200},
		{false, "/v1/events?limit=0", env.AdminKey, 422},
		{false, "/v1/events?category=spyware", env.AdminKey, 422},
		{true, "/v1/events?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z", env.AdminKey, 422},
		{false, "/v1/events", "", 401},
		{true, "/v1/timelines/device/contract-no-such-device", env.AdminKey, 404},
		{true, "/v1/overview?app_id=" + demoApp, env.AdminKey, 200},
		{true, "/v1/overview?from=2026-11-26&to=2026-12-03", env.AdminKey, 200},
		{true, "/v1/map", env.AdminKey, 200},
		{true, "/v1/map?threat=Hooks&k=10", env.AdminKey, 200},
		{false, "/v1/map?k=2", env.AdminKey, 422},
		{true, "/v1/charts/map.svg", env.AdminKey, 200},
		{true, "/v1/reports/threats/Hooks", env.AdminKey, 200},
		{true, "/v1/reports/threats/anti-dynamic-analysis?from=2026-11-26", env.AdminKey, 200},
		{true, "/v1/taxonomy", env.AdminKey, 200},
	} {
		st, b := c.call(tc.valid, http.MethodGet, tc.path, tc.key, nil, nil)
		c.want("GET "+tc.path, st, tc.status, b)
	}
	// A timeline that exists, and the taxonomy written back as it is.
	var page struct {
		Events []struct {
			Device struct {
				ID string `json:"id"`
			} `json:"device"`
			Threats []struct {
				Type, Category, Severity string
			} `json:"threats"`
		} `json:"events"`
	}
	st, b := c.call(true, http.MethodGet, "/v1/events?limit=50", env.AdminKey, nil, nil)
	c.want("latest events", st, 200, b)
	_ = json.Unmarshal(b, &page)
	for _, e := range page.Events {
		if e.Device.ID != "" {
			st, b := c.call(true, http.MethodGet, "/v1/timelines/device/"+url.PathEscape(e.Device.ID), env.AdminKey, nil, nil)
			c.want("a device's timeline", st, 200, b)
			break
		}
	}
	put := []byte(`{"category":"anti-dynamic-analysis","severity":"critical"}`)
	st, b = c.call(true, http.MethodPut, "/v1/taxonomy/Hooks", env.AdminKey, put, map[string]string{"Content-Type": "application/json"})
	c.want("PUT the taxonomy", st, 200, b)
	st, b = c.call(false, http.MethodPut, "/v1/taxonomy/Hooks", env.AdminKey, []byte(`{"category":"spyware","severity":"high"}`), map[string]string{"Content-Type": "application/json"})
	c.want("PUT a bad category", st, 422, b)
	t.Log(c.spec.report())
}
