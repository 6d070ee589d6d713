package contract

import (
	"encoding/json"
	"net/http"
	"testing"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// TestConformance_Identity drives the identity service as the admin
// interface does (sign in, manage a user, refresh, sign out) and validates
// every answer against api/identity.openapi.json.
func TestConformance_Identity(t *testing.T) {
	env := e2etest.MustEnv(t)
	base := testenv.MustEnv(t, "THREATVIEW_IDENTITY_URL")
	c := newCaller(t, "identity", base)
	c.ops()
	st, b := c.call(true, http.MethodGet, "/.well-known/jwks.json", "", nil, nil)
	c.want("GET /.well-known/jwks.json", st, 200, b)
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	name := e2etest.Name("contract")
	const pw = "contract-test-password-1"

	st, b = c.call(true, "POST", "/v1/users", env.AdminKey, js(map[string]any{"username": name, "password": pw, "roles": []string{"analyst"}}), nil)
	c.want("create a user", st, 201, b)
	t.Cleanup(func() { c.call(true, "DELETE", "/v1/users/"+name, env.AdminKey, nil, nil) })
	st, b = c.call(true, "POST", "/v1/users", env.AdminKey, js(map[string]any{"username": name, "password": pw, "roles": []string{"analyst"}}), nil)
	c.want("create it again", st, 409, b)
	st, b = c.call(false, "POST", "/v1/users", env.AdminKey, js(map[string]any{"username": name, "colour": "red"}), nil)
	c.want("create with an unknown field", st, 422, b)
	st, b = c.call(true, "GET", "/v1/users", env.AdminKey, nil, nil)
	c.want("list users", st, 200, b)
	st, b = c.call(true, "GET", "/v1/users/"+name, env.AdminKey, nil, nil)
	c.want("get the user", st, 200, b)
	st, b = c.call(true, "GET", "/v1/users/"+e2etest.Name("nobody"), env.AdminKey, nil, nil)
	c.want("get an unknown user", st, 404, b)
	st, b = c.call(true, "PATCH", "/v1/users/"+name, env.AdminKey, js(map[string]any{"roles": []string{"analyst", "auditor"}}), nil)
	c.want("update roles", st, 200, b)
	st, b = c.call(true, "PUT", "/v1/users/"+name+"/password", env.AdminKey, js(map[string]any{"password": pw + "x"}), nil)
	c.want("set the password", st, 204, b)

	st, b = c.call(true, "POST", "/v1/login", "", js(map[string]string{"username": name, "password": "wrong password!"}), nil)
	c.want("sign in with a wrong password", st, 401, b)
	st, b = c.call(true, "POST", "/v1/login", "", js(map[string]string{"username": name, "password": pw + "x"}), nil)
	c.want("sign in", st, 200, b)
	var s struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Access == "" {
		t.Fatalf("sign in answered %s: %v", b, err)
	}
	st, b = c.call(true, "GET", "/v1/me", s.Access, nil, nil)
	c.want("me", st, 200, b)
	st, b = c.call(true, "GET", "/v1/users", s.Access, nil, nil)
	c.want("list users as an analyst", st, 403, b)
	// The other services take the access token and check its role: an
	// analyst may not manage tokens, and may read the audit trail only as
	// an auditor (which the user is, since the PATCH above).
	tc := newCaller(t, "tokens", env.TokensURL)
	st, b = tc.call(true, "GET", "/v1/tokens", s.Access, nil, nil)
	tc.want("list tokens as an analyst", st, 403, b)
	ac := newCaller(t, "auditlogger", env.AuditURL)
	st, b = ac.call(true, "GET", "/v1/audit?limit=1", s.Access, nil, nil)
	ac.want("read the audit trail as an auditor", st, 200, b)
	st, b = c.call(true, "GET", "/v1/me", "not-a-token", nil, nil)
	c.want("me with a bad token", st, 401, b)
	st, b = c.call(true, "POST", "/v1/refresh", "", js(map[string]string{"refresh_token": s.Refresh}), nil)
	c.want("refresh", st, 200, b)
	var s2 struct {
		Refresh string `json:"refresh_token"`
	}
	_ = json.Unmarshal(b, &s2)
	st, b = c.call(true, "POST", "/v1/refresh", "", js(map[string]string{"refresh_token": s.Refresh}), nil)
	c.want("refresh with a used token", st, 401, b)
	st, b = c.call(true, "POST", "/v1/logout", "", js(map[string]string{"refresh_token": s2.Refresh}), nil)
	c.want("sign out", st, 204, b)
	// Changing one's password signs one out everywhere: last.
	st, b = c.call(true, "POST", "/v1/me/password", s.Access, js(map[string]string{"current_password": pw + "x", "new_password": pw + "y"}), nil)
	c.want("change one's password", st, 204, b)
	st, b = c.call(true, "DELETE", "/v1/users/"+name, env.AdminKey, nil, nil)
	c.want("delete the user", st, 204, b)
	t.Log(c.spec.report())
}
