package security

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// TestNoSecretInErrorBodiesOrLogs exercises the APIs the way clients and
// operators get them wrong (wrong keys, keys of the other kind, tokens where
// keys belong, a revoked token, bad bodies around a token) and checks that
// no secret (ADMIN_KEY, INTERNAL_KEY, the demo token, a fresh token) comes
// back in any answer, then that none appears in any log under .run/log.
func TestNoSecretInErrorBodiesOrLogs(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "e2e-secret")
	revoked := e2etest.NewApp(t, env, "e2e-revoked")
	secrets := map[string]string{
		"ADMIN_KEY":     env.AdminKey,
		"INTERNAL_KEY":  env.InternalKey,
		"fresh token":   app.Token,
		"revoked token": revoked.Token,
	}
	if env.DemoToken != "" {
		secrets["demo token"] = env.DemoToken
	}
	for name, s := range secrets {
		if len(s) < 16 {
			t.Fatalf("%s is only %d characters: too short to search for", name, len(s))
		}
	}

	if r := e2etest.Do(t, http.MethodDelete, env.TokensURL+"/v1/tokens/"+revoked.TokenID, env.AdminKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	type call struct {
		method, url, auth string
		body              string
	}
	ev := string(e2etest.GoodEvent(app.ID, e2etest.UUID()))
	calls := []call{
		{http.MethodPost, env.CollectorURL + "/v1/events", env.AdminKey, ev},
		{http.MethodPost, env.CollectorURL + "/v1/events", env.InternalKey, ev},
		{http.MethodPost, env.CollectorURL + "/v1/events", revoked.Token, string(e2etest.GoodEvent(revoked.ID, e2etest.UUID()))},
		{http.MethodPost, env.CollectorURL + "/v1/events", app.Token, `{"type":` + app.Token},
		{http.MethodPost, env.CollectorURL + "/v1/events", app.Token, string(e2etest.GoodEvent("someone-else", e2etest.UUID()))},
		{http.MethodPost, env.CollectorURL + "/v1/events", app.Token, `{"type":"x","app":{"id":"` + app.ID + `"},"token":"` + app.Token + `"}`},
		{http.MethodPost, env.TokensURL + "/v1/tokens", env.InternalKey, `{"app_id":"x"}`},
		{http.MethodPost, env.TokensURL + "/v1/tokens", app.Token, `{"app_id":"x"}`},
		{http.MethodPost, env.TokensURL + "/v1/tokens", env.AdminKey, `{"app_id":"x","secret":"` + env.InternalKey + `"}`},
		{http.MethodGet, env.TokensURL + "/v1/tokens?app_id=" + app.ID, env.AdminKey, ""},
		{http.MethodGet, env.TokensURL + "/v1/tokens/" + app.TokenID, env.AdminKey, ""},
		{http.MethodPost, env.TokensURL + "/v1/introspect", env.AdminKey, `{"token":"` + app.Token + `"}`},
		{http.MethodPost, env.TokensURL + "/v1/introspect", env.InternalKey, `{"token":"` + revoked.Token + `"}`},
		{http.MethodPost, env.TokensURL + "/v1/introspect", env.InternalKey, `{"token":"` + app.Token + `x"}`},
		{http.MethodPost, env.TokensURL + "/v1/introspect", env.InternalKey, `{"token":` + app.Token + `}`},
		{http.MethodGet, env.AuditURL + "/v1/audit?limit=1", env.InternalKey, ""},
		{http.MethodGet, env.AuditURL + "/v1/audit?actor=" + app.Token, env.AdminKey, ""},
		{http.MethodPost, env.AuditURL + "/v1/audit", env.AdminKey, `{}`},
		{http.MethodPost, env.AuditURL + "/v1/audit", env.InternalKey, `{"id":"` + app.Token + `"}`},
	}
	for _, c := range calls {
		r := e2etest.Do(t, c.method, c.url, c.auth, []byte(c.body), nil)
		for name, s := range secrets {
			// The introspection of a valid token answers its id, never the token.
			if bytes.Contains(r.Body, []byte(s)) {
				t.Errorf("%s %s answered %d with %s in the body", c.method, c.url, r.Status, name)
			}
			for k, vs := range r.Header {
				for _, v := range vs {
					if strings.Contains(v, s) {
						t.Errorf("%s %s answered with %s in header %s", c.method, c.url, name, k)
					}
				}
			}
		}
	}

	logs, err := filepath.Glob(filepath.Join(testenv.Root(t), ".run", "log", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no logs under .run/log: %v", err)
	}
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Errorf("open %s: %v", path, err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		line := 0
		for sc.Scan() {
			line++
			for name, s := range secrets {
				if bytes.Contains(sc.Bytes(), []byte(s)) {
					t.Errorf("%s:%d holds %s", filepath.Base(path), line, name)
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Errorf("read %s: %v", path, err)
		}
		f.Close()
	}
}
