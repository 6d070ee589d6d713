package security

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
)

// credential is one way of presenting (or not) a bearer credential.
type credential struct {
	name   string
	header string // the whole Authorization header; "" sends none
}

func bearer(s string) string { return "Bearer " + s }

// TestProtectedEndpoints_RefuseOtherCredentials calls every operator and
// service-to-service endpoint with no credential, a wrong one, an app
// token, the other key kind and near misses of the right key: each must be
// 401 with the JSON error body and WWW-Authenticate, and change nothing.
func TestProtectedEndpoints_RefuseOtherCredentials(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "e2e-auth")
	victim := e2etest.NewApp(t, env, "e2e-victim") // its token must survive the wrong DELETEs
	created := e2etest.Name("e2e-nocreate")        // no token may be created for it
	auditPrefix := e2etest.Name("e2e-noaudit")

	common := func(right string) []credential {
		return []credential{
			{"None", ""},
			{"Empty", "Bearer "},
			{"Wrong", bearer("wrong-" + e2etest.UUID())},
			{"AppToken", bearer(app.Token)},
			{"RightKeyBasicScheme", "Basic " + right},
			{"RightKeyPlusChar", bearer(right + "x")},
			{"RightKeyPrefix", bearer(right[:len(right)-1])},
			{"RightKeyUpperCase", bearer(strings.ToUpper(right))},
		}
	}
	adminCreds := append(common(env.AdminKey), credential{"InternalKey", bearer(env.InternalKey)})
	internalCreds := append(common(env.InternalKey), credential{"AdminKey", bearer(env.AdminKey)})
	if env.DemoToken != "" {
		adminCreds = append(adminCreds, credential{"DemoToken", bearer(env.DemoToken)})
		internalCreds = append(internalCreds, credential{"DemoToken", bearer(env.DemoToken)})
	}

	var auditIDs []string
	auditBody := func() []byte {
		id := e2etest.UUID()
		auditIDs = append(auditIDs, id)
		b, _ := json.Marshal(map[string]any{
			"id": id, "time": time.Now().UTC(), "action": "e2e.auth", "outcome": 200,
			"request_id": auditPrefix + "-" + id[:8],
		})
		return b
	}
	endpoints := []struct {
		name   string
		method string
		url    string
		body   func() []byte
		creds  []credential
	}{
		{"TokensCreate", http.MethodPost, env.TokensURL + "/v1/tokens", func() []byte { return []byte(`{"app_id":"` + created + `"}`) }, adminCreds},
		{"TokensList", http.MethodGet, env.TokensURL + "/v1/tokens", nil, adminCreds},
		{"TokensGet", http.MethodGet, env.TokensURL + "/v1/tokens/" + victim.TokenID, nil, adminCreds},
		{"TokensRevoke", http.MethodDelete, env.TokensURL + "/v1/tokens/" + victim.TokenID, nil, adminCreds},
		{"TokensIntrospect", http.MethodPost, env.TokensURL + "/v1/introspect", func() []byte { return []byte(`{"token":"` + app.Token + `"}`) }, internalCreds},
		{"AuditQuery", http.MethodGet, env.AuditURL + "/v1/audit?limit=1", nil, adminCreds},
		{"AuditPost", http.MethodPost, env.AuditURL + "/v1/audit", auditBody, internalCreds},
	}
	for _, ep := range endpoints {
		for _, c := range ep.creds {
			t.Run(ep.name+"/"+c.name, func(t *testing.T) {
				var body []byte
				if ep.body != nil {
					body = ep.body()
				}
				r := e2etest.Do(t, ep.method, ep.url, "", body, map[string]string{"Authorization": c.header})
				e2etest.CheckError(t, ep.name+" with "+c.name, r, http.StatusUnauthorized)
				if r.Status == http.StatusUnauthorized && r.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s with %s: 401 without WWW-Authenticate", ep.name, c.name)
				}
			})
		}
	}
	t.Run("Collector", func(t *testing.T) {
		for _, c := range []credential{
			{"None", ""}, {"Wrong", bearer("tvk_" + strings.Repeat("A", 43))}, {"Garbage", bearer("x")},
			{"AdminKey", bearer(env.AdminKey)}, {"InternalKey", bearer(env.InternalKey)}, {"BasicScheme", "Basic " + app.Token},
		} {
			r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", "", e2etest.GoodEvent(app.ID, e2etest.UUID()), map[string]string{"Authorization": c.header})
			e2etest.CheckError(t, "collector with "+c.name, r, http.StatusUnauthorized)
		}
	})

	// Nothing changed: no token for created, the victim's token is active,
	// and none of the refused audit records was stored (checked once a good
	// record, posted after them, is stored).
	ctx := context.Background()
	tokens := e2etest.MariaDB(t, env.TokensDSN)
	var n int
	if err := tokens.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE app_id = ?`, created).Scan(&n); err != nil || n != 0 {
		t.Errorf("tokens for %s: %d, %v; want none", created, n, err)
	}
	if err := tokens.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE id = ? AND revoked_at IS NULL`, victim.TokenID).Scan(&n); err != nil || n != 1 {
		t.Errorf("victim token %s active: %d, %v; want 1", victim.TokenID, n, err)
	}
	r := e2etest.Do(t, http.MethodPost, env.CollectorURL+"/v1/events", victim.Token, e2etest.GoodEvent(victim.ID, e2etest.UUID()), nil)
	if r.Status != http.StatusAccepted {
		t.Errorf("victim token after refused revocations: %d %s, want 202", r.Status, r.Body)
	}
	marker := e2etest.UUID()
	mb, _ := json.Marshal(map[string]any{"id": marker, "time": time.Now().UTC(), "action": "e2e.auth", "outcome": 200, "request_id": auditPrefix + "-marker"})
	if r := e2etest.Do(t, http.MethodPost, env.AuditURL+"/v1/audit", env.InternalKey, mb, nil); r.Status != http.StatusAccepted {
		t.Fatalf("marker audit record: %d %s", r.Status, r.Body)
	}
	audit := e2etest.MariaDB(t, env.AuditDSN)
	err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		err := audit.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE action = 'e2e.auth' AND request_id = ?`, auditPrefix+"-marker").Scan(&n)
		return n == 1, err
	})
	if err != nil {
		t.Fatalf("marker audit record not stored: %v", err)
	}
	if err := audit.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE action = 'e2e.auth' AND request_id LIKE ?`, auditPrefix+"-%").Scan(&n); err != nil || n != 1 {
		t.Errorf("audit rows of this test: %d, %v; want only the marker (refused posts of %d records must not be stored)", n, err, len(auditIDs))
	}
}

// TestAppToken_CannotWriteAsAnotherApp posts events naming app B with app
// A's token (alone and inside a batch with A's own events): 403, and
// nothing of either is stored; A's marker afterwards is its only event.
func TestAppToken_CannotWriteAsAnotherApp(t *testing.T) {
	env := e2etest.MustEnv(t)
	a := e2etest.NewApp(t, env, "e2e-owner")
	b := e2etest.NewApp(t, env, "e2e-other")
	since := time.Now().Add(-time.Minute)
	url := env.CollectorURL + "/v1/events"

	r := e2etest.Do(t, http.MethodPost, url, a.Token, e2etest.GoodEvent(b.ID, e2etest.UUID()), nil)
	e2etest.CheckError(t, "event of B with A's token", r, http.StatusForbidden)
	mixed := `{"events":[` + string(e2etest.GoodEvent(a.ID, e2etest.UUID())) + `,` + string(e2etest.GoodEvent(b.ID, e2etest.UUID())) + `]}`
	r = e2etest.Do(t, http.MethodPost, url, a.Token, []byte(mixed), nil)
	e2etest.CheckError(t, "batch of A and B with A's token", r, http.StatusForbidden)
	upper := strings.Replace(string(e2etest.GoodEvent(b.ID, e2etest.UUID())), b.ID, strings.ToUpper(a.ID), 1)
	r = e2etest.Do(t, http.MethodPost, url, a.Token, []byte(upper), nil)
	e2etest.CheckError(t, "A's app id in upper case", r, http.StatusForbidden)

	marker := e2etest.UUID()
	if r := e2etest.Do(t, http.MethodPost, url, a.Token, e2etest.GoodEvent(a.ID, marker), nil); r.Status != http.StatusAccepted {
		t.Fatalf("marker: %d %s", r.Status, r.Body)
	}
	pool := e2etest.Events(t, env)
	ctx := context.Background()
	var storedA map[string]int
	err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		var err error
		storedA, err = e2etest.StoredCounts(ctx, pool, a.ID, since)
		return storedA[marker] > 0, err
	})
	if err != nil {
		t.Fatalf("marker not stored: %v", err)
	}
	if len(storedA) != 1 || storedA[marker] != 1 {
		t.Errorf("app A events %v, want only the marker", storedA)
	}
	storedB, err := e2etest.StoredCounts(ctx, pool, b.ID, since)
	if err != nil || len(storedB) != 0 {
		t.Errorf("app B events %v, %v; want none", storedB, err)
	}
}
