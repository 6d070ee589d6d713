package badinput

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
)

// auditRecord returns a valid audit record (as JSON fields) for the request
// id rid, with extra replacing or adding raw JSON values.
func auditRecord(rid string, extra map[string]string) string {
	f := map[string]string{
		"id":           `"` + e2etest.UUID() + `"`,
		"time":         `"` + time.Now().UTC().Format(time.RFC3339Nano) + `"`,
		"actor_app_id": `"e2e-audit-bad"`,
		"action":       `"e2e.badinput"`,
		"outcome":      `200`,
		"request_id":   `"` + rid + `"`,
		"event_count":  `0`,
	}
	for k, v := range extra {
		if v == "" {
			delete(f, k)
		} else {
			f[k] = v
		}
	}
	parts := make([]string, 0, len(f))
	for k, v := range f {
		parts = append(parts, `"`+k+`":`+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestAuditLogger_BadInput posts bad bodies to POST /v1/audit with the
// internal key. Each bad record carries a request id of this test; after a
// good marker record is stored, none of them may be in the audit table.
func TestAuditLogger_BadInput(t *testing.T) {
	env := e2etest.MustEnv(t)
	prefix := e2etest.Name("e2e-auditbad")
	rid := func(n string) string { return prefix + "-" + n }
	cases := []struct {
		name   string
		body   string
		header map[string]string
		status int
	}{
		{"Malformed", `{"id":`, nil, 400},
		{"Truncated", auditRecord(rid("t"), nil)[:40], nil, 400},
		{"NotJSON", "hello", nil, 400},
		// JSON text must be UTF-8 (RFC 8259): 400, as at the collector.
		{"InvalidUTF8", auditRecord(rid("u"), map[string]string{"action": "\"e2e\xff\""}), nil, 400},
		{"WrongTypeOutcome", auditRecord(rid("o"), map[string]string{"outcome": `"ok"`}), nil, 422},
		{"BadTime", auditRecord(rid("tm"), map[string]string{"time": `"yesterday"`}), nil, 422},
		{"MissingID", auditRecord(rid("i"), map[string]string{"id": ""}), nil, 422},
		{"OutcomeNotStatus", auditRecord(rid("s"), map[string]string{"outcome": "42"}), nil, 422},
		{"LongAction", auditRecord(rid("a"), map[string]string{"action": `"` + strings.Repeat("a", 4096) + `"`}), nil, 422},
		{"BadClientIP", auditRecord(rid("ip"), map[string]string{"client_ip": `"not-an-ip"`}), nil, 422},
		{"WrongVersion", `{"v":2,"records":[` + auditRecord(rid("v"), nil) + `]}`, nil, 422},
		{"EmptyBatch", `{"v":1,"records":[]}`, nil, 422},
		{"BatchWithOneBadRecord", `{"v":1,"records":[` + auditRecord(rid("b1"), nil) + `,` + auditRecord(rid("b2"), map[string]string{"outcome": "0"}) + `]}`, nil, 422},
		{"TooLarge", auditRecord(rid("big"), map[string]string{"user_agent": `"` + strings.Repeat("x", 5<<20) + `"`}), nil, 413},
		{"TextPlain", auditRecord(rid("ct"), nil), map[string]string{"Content-Type": "text/plain"}, 415},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e2etest.Do(t, http.MethodPost, env.AuditURL+"/v1/audit", env.InternalKey, []byte(c.body), c.header)
			e2etest.CheckError(t, c.name, r, c.status)
		})
	}
	t.Run("BadQuery", func(t *testing.T) {
		for _, q := range []string{"?limit=0", "?limit=x", "?from=yesterday", "?nope=1", "?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "?cursor=%ff%fe"} {
			r := e2etest.Do(t, http.MethodGet, env.AuditURL+"/v1/audit"+q, env.AdminKey, nil, nil)
			e2etest.CheckError(t, "GET /v1/audit"+q, r, 400)
		}
	})

	// A good record marks the end: once it is stored, the bad ones would be too.
	marker := rid("marker")
	r := e2etest.Do(t, http.MethodPost, env.AuditURL+"/v1/audit", env.InternalKey, []byte(auditRecord(marker, nil)), nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("marker record: %d %s", r.Status, r.Body)
	}
	db := e2etest.MariaDB(t, env.AuditDSN)
	var got map[string]int
	err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
		rows, err := db.QueryContext(context.Background(), `SELECT request_id, count(*) FROM audit_events
			WHERE action = 'e2e.badinput' AND request_id LIKE ? GROUP BY request_id`, prefix+"-%")
		if err != nil {
			return false, err
		}
		defer rows.Close()
		got = map[string]int{}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				return false, err
			}
			got[id] = n
		}
		return got[marker] > 0, rows.Err()
	})
	if err != nil {
		t.Fatalf("marker audit record not stored: %v", err)
	}
	if len(got) != 1 || got[marker] != 1 {
		t.Errorf("audit rows of this test: %v, want only the marker once", got)
	}
	e2etest.Healthy(t, env)
}

// TestTokens_BadInput sends bad bodies and parameters to the tokens admin
// API (with the admin key) and to introspection (internal key); none may
// create a token.
func TestTokens_BadInput(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.Name("e2e-tokbad")
	post := func(body string, header map[string]string) e2etest.Response {
		return e2etest.Do(t, http.MethodPost, env.TokensURL+"/v1/tokens", env.AdminKey, []byte(body), header)
	}
	cases := []struct {
		name   string
		r      func() e2etest.Response
		status int
	}{
		{"Malformed", func() e2etest.Response { return post(`{"app_id":`, nil) }, 400},
		{"NotAnObject", func() e2etest.Response { return post(`["`+app+`"]`, nil) }, 400},
		{"TrailingData", func() e2etest.Response { return post(`{"app_id":"`+app+`"} {}`, nil) }, 400},
		{"UnknownField", func() e2etest.Response { return post(`{"app_id":"`+app+`","admin":true}`, nil) }, 422},
		{"WrongType", func() e2etest.Response { return post(`{"app_id":5}`, nil) }, 422},
		{"BadAppID", func() e2etest.Response { return post(`{"app_id":"`+app+` ; DROP TABLE tokens"}`, nil) }, 422},
		{"EmptyAppID", func() e2etest.Response { return post(`{"app_id":""}`, nil) }, 422},
		// Known defect: encoding/json turns the invalid byte into U+FFFD,
		// so the service stores a name the operator never sent (201).
		{"InvalidUTF8", func() e2etest.Response { return post("{\"app_id\":\""+app+"\",\"name\":\"\xff\"}", nil) }, 400},
		{"NULInAppID", func() e2etest.Response { return post(`{"app_id":"`+app+`\u0000"}`, nil) }, 422},
		{"TooLarge", func() e2etest.Response {
			return post(`{"app_id":"`+app+`","name":"`+strings.Repeat("n", 20<<10)+`"}`, nil)
		}, 413},
		{"LongName", func() e2etest.Response {
			return post(`{"app_id":"`+app+`","name":"`+strings.Repeat("n", 201)+`"}`, nil)
		}, 422},
		{"BadID", func() e2etest.Response {
			return e2etest.Do(t, http.MethodGet, env.TokensURL+"/v1/tokens/not-a-uuid", env.AdminKey, nil, nil)
		}, 400},
		{"RevokeBadID", func() e2etest.Response {
			return e2etest.Do(t, http.MethodDelete, env.TokensURL+"/v1/tokens/%27%20OR%201=1", env.AdminKey, nil, nil)
		}, 400},
		{"UnknownToken", func() e2etest.Response {
			return e2etest.Do(t, http.MethodGet, env.TokensURL+"/v1/tokens/"+e2etest.UUID(), env.AdminKey, nil, nil)
		}, 404},
		{"BadLimit", func() e2etest.Response {
			return e2etest.Do(t, http.MethodGet, env.TokensURL+"/v1/tokens?limit=0", env.AdminKey, nil, nil)
		}, 400},
		{"UnknownParameter", func() e2etest.Response {
			return e2etest.Do(t, http.MethodGet, env.TokensURL+"/v1/tokens?app=x", env.AdminKey, nil, nil)
		}, 400},
		{"IntrospectMalformed", func() e2etest.Response {
			return e2etest.Do(t, http.MethodPost, env.TokensURL+"/v1/introspect", env.InternalKey, []byte(`{"token":`), nil)
		}, 400},
		{"IntrospectWrongType", func() e2etest.Response {
			return e2etest.Do(t, http.MethodPost, env.TokensURL+"/v1/introspect", env.InternalKey, []byte(`{"token":["x"]}`), nil)
		}, 422},
		{"MethodNotAllowed", func() e2etest.Response {
			return e2etest.Do(t, http.MethodPut, env.TokensURL+"/v1/tokens", env.AdminKey, []byte(`{}`), nil)
		}, 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e2etest.CheckError(t, c.name, c.r(), c.status)
		})
	}
	t.Run("IntrospectGarbageIsInactive", func(t *testing.T) {
		r := e2etest.Do(t, http.MethodPost, env.TokensURL+"/v1/introspect", env.InternalKey, []byte(`{"token":"tvk_\u0000`+strings.Repeat("A", 42)+`"}`), nil)
		var out map[string]any
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &out) != nil || out["active"] != false {
			t.Errorf("introspect garbage: %d %s, want 200 {\"active\":false}", r.Status, r.Body)
		}
	})
	db := e2etest.MariaDB(t, env.TokensDSN)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM tokens WHERE app_id LIKE ?`, app+"%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tokens exist for app ids starting %s, want none", n, app)
	}
	e2etest.Healthy(t, env)
}
