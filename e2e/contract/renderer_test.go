package contract

import (
	"net/http"
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
	} {
		st, b := c.call(tc.valid, http.MethodGet, tc.path, tc.key, nil, nil)
		c.want("GET "+tc.path, st, tc.status, b)
	}
	t.Log(c.spec.report())
}
