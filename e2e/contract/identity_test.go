package contract

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

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
	// A refresh token is used up by a refresh. Presented again within the
	// reuse grace (two page loads renewing at once) it gets a sibling in the
	// same family; presented after the grace it is taken for stolen: 401,
	// and its whole family, siblings included, is revoked.
	refresh := func(what, token string, want int) string {
		t.Helper()
		st, b := c.call(true, "POST", "/v1/refresh", "", js(map[string]string{"refresh_token": token}), nil)
		c.want(what, st, want, b)
		var r struct {
			Refresh string `json:"refresh_token"`
		}
		if want == 200 {
			if err := json.Unmarshal(b, &r); err != nil || r.Refresh == "" {
				t.Fatalf("%s answered %s: %v", what, b, err)
			}
		}
		return r.Refresh
	}
	r2 := refresh("refresh", s.Refresh, 200)
	usedBy := time.Now()
	r3 := refresh("refresh with a used token within the reuse grace", s.Refresh, 200)
	if r3 == r2 || r3 == s.Refresh {
		t.Fatalf("a reuse within the grace answered a token already given out")
	}
	time.Sleep(time.Until(usedBy.Add(reuseGrace(t) + time.Second)))
	refresh("refresh with a used token after the reuse grace", s.Refresh, 401)
	refresh("refresh with the first renewal of a family revoked for reuse", r2, 401)
	refresh("refresh with the sibling given within the grace, family revoked", r3, 401)

	st, b = c.call(true, "POST", "/v1/login", "", js(map[string]string{"username": name, "password": pw + "x"}), nil)
	c.want("sign in again", st, 200, b)
	if err := json.Unmarshal(b, &s); err != nil || s.Refresh == "" {
		t.Fatalf("sign in answered %s: %v", b, err)
	}
	st, b = c.call(true, "POST", "/v1/logout", "", js(map[string]string{"refresh_token": s.Refresh}), nil)
	c.want("sign out", st, 204, b)
	refresh("refresh after signing out", s.Refresh, 401)
	// Changing one's password signs one out everywhere: last.
	st, b = c.call(true, "POST", "/v1/me/password", s.Access, js(map[string]string{"current_password": pw + "x", "new_password": pw + "y"}), nil)
	c.want("change one's password", st, 204, b)
	st, b = c.call(true, "DELETE", "/v1/users/"+name, env.AdminKey, nil, nil)
	c.want("delete the user", st, 204, b)
	t.Log(c.spec.report())
}

// reuseGrace is the identity service's IDENTITY_REFRESH_REUSE_GRACE: its
// default (10 s, which the local stack keeps) unless the environment names
// another.
func reuseGrace(t *testing.T) time.Duration {
	v := os.Getenv("IDENTITY_REFRESH_REUSE_GRACE")
	if v == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("IDENTITY_REFRESH_REUSE_GRACE=%q: %v", v, err)
	}
	return d
}
