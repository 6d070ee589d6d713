package contract

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"threatview/api"
	"threatview/e2e/internal/e2etest"
	"threatview/platform/authz"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
	"threatview/retention/privacy"
)

// TestRoutes_PrivacyDocumented compares the privacy service's router with
// api/privacy.openapi.json.
func TestRoutes_PrivacyDocumented(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := privacy.NewAPI(nil, nil, nil, log).Handler(authz.New(nil, "a", log), httpserver.NewRegistry(), nil, api.Privacy)
	for _, problem := range compareRoutes(t, h, "privacy", api.Privacy) {
		t.Error(problem)
	}
}

// TestConformance_Privacy drives every operation of the running privacy
// service and checks each answer against its document.
func TestConformance_Privacy(t *testing.T) {
	env := e2etest.MustEnv(t)
	c := newCaller(t, "privacy", testenv.MustEnv(t, "THREATVIEW_PRIVACY_URL"))
	c.ops()
	app := e2etest.NewApp(t, env, "contract-privacy")
	r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", app.Token, e2etest.GoodEvent(app.ID, e2etest.UUID()), nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("post event: %d %s", r.Status, r.Body)
	}
	pool := e2etest.Events(t, env)
	if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		var n int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM events.events WHERE app_id = $1`, app.ID).Scan(&n)
		return n == 1, err
	}); err != nil {
		t.Fatalf("event not stored: %v", err)
	}
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }

	st, b := c.call(true, "POST", "/v1/erasures", env.AdminKey, js(map[string]any{"app_id": app.ID, "device_id": "e2e-device", "suppress": false}), nil)
	c.want("an erasure", st, 202, b)
	var acc struct{ ID string }
	_ = json.Unmarshal(b, &acc)
	st, b = c.call(true, "POST", "/v1/erasures", env.AdminKey, js(map[string]any{"app_id": app.ID, "device_id": "e2e-device"}), nil)
	c.want("a second erasure of the device", st, 409, b)
	st, b = c.call(true, "POST", "/v1/erasures", env.AdminKey, js(map[string]any{"app_id": "no-such-app-contract", "device_id": "d"}), nil)
	c.want("an unknown app", st, 422, b)
	st, b = c.call(false, "POST", "/v1/erasures", env.AdminKey, []byte(`[`), nil)
	c.want("not JSON", st, 400, b)
	st, b = c.call(false, "POST", "/v1/erasures", "", js(map[string]any{"app_id": app.ID, "device_id": "d"}), nil)
	c.want("no key", st, 401, b)
	st, b = c.call(true, "GET", "/v1/erasures/"+acc.ID, env.AdminKey, nil, nil)
	c.want("the erasure", st, 200, b)
	st, b = c.call(true, "GET", "/v1/erasures/"+e2etest.UUID(), env.AdminKey, nil, nil)
	c.want("an unknown erasure", st, 404, b)
	st, b = c.call(true, "GET", "/v1/erasures?limit=5", env.AdminKey, nil, nil)
	c.want("the list", st, 200, b)
	st, b = c.call(false, "GET", "/v1/erasures?limit=0", env.AdminKey, nil, nil)
	c.want("a bad limit", st, 422, b)
	st, b = c.call(true, "GET", "/v1/suppressions", env.AdminKey, nil, nil)
	c.want("the suppressions", st, 200, b)
	// The job waits out the settle time.
	if err := e2etest.WaitFor(3*time.Minute, func() (bool, error) {
		st, b := c.call(true, "GET", "/v1/erasures/"+acc.ID, env.AdminKey, nil, nil)
		var e struct{ Status string }
		_ = json.Unmarshal(b, &e)
		return st == 200 && e.Status == "done", nil
	}); err != nil {
		_, b := c.call(true, "GET", "/v1/erasures/"+acc.ID, env.AdminKey, nil, nil)
		t.Fatalf("erasure not done: %v (%.500s)", err, b)
	}
	// With suppress false the job lifted its suppression itself.
	st, b = c.call(true, "DELETE", "/v1/suppressions?app_id="+app.ID+"&device_id=e2e-device", env.AdminKey, nil, nil)
	c.want("lifting a suppression that is not there", st, 404, b)
	st, b = c.call(false, "DELETE", "/v1/suppressions?app_id="+app.ID, env.AdminKey, nil, nil)
	c.want("lifting without a device", st, 422, b)
	t.Log(c.spec.report())
}
