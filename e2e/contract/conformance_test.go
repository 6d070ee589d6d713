package contract

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/api"
	"threatview/e2e/internal/e2etest"
)

// caller sends requests to one running service through a validating
// transport.
type caller struct {
	t    *testing.T
	spec *spec
	base string
}

func newCaller(t *testing.T, name, base string) *caller {
	return &caller{t: t, spec: specFor(t, name), base: base}
}

// call sends a request. valid says whether the document allows it (true:
// a request the document refuses is an error; false: the document must
// refuse it too, so the spec is as strict as the service). Every answer is
// validated. It returns the status and body.
func (c *caller) call(valid bool, method, path, bearer string, body []byte, header map[string]string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if !valid && c.spec.operation(method, req.URL.Path) != "" {
		if errs := c.spec.checkRequest(req, body); errs == nil {
			c.t.Errorf("%s: the document allows %s %s %.100s, which the test sends as bad input", c.spec.name, method, path, body)
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &transport{t: c.t, spec: c.spec, wantValid: valid}}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// want checks a status.
func (c *caller) want(what string, status, want int, body []byte) {
	c.t.Helper()
	if status != want {
		c.t.Errorf("%s: %s answered %d, want %d (%.300s)", c.spec.name, what, status, want, body)
	}
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ops checks the operational endpoints and that the service serves the
// document in api/ byte for byte.
func (c *caller) ops() {
	c.t.Helper()
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		st, b := c.call(true, http.MethodGet, p, "", nil, nil)
		c.want("GET "+p, st, 200, b)
	}
	st, b := c.call(true, http.MethodGet, "/openapi.json", "", nil, nil)
	c.want("GET /openapi.json", st, 200, b)
	if !bytes.Equal(b, api.Documents()[c.spec.name]) {
		c.t.Errorf("%s serves an /openapi.json other than api/%s.openapi.json: a binary built before the document changed? "+
			"(go build -o .run/bin/ ./services/%s/cmd/%s && scripts/stack.sh restart %s)", c.spec.name, c.spec.name, c.spec.name, c.spec.name, c.spec.name)
	}
	st, b = c.call(false, http.MethodGet, "/no/such/route", "", nil, nil)
	c.want("GET /no/such/route", st, 404, b)
}

func TestConformance_Collector(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "contract")
	c := newCaller(t, "collector", env.CollectorURL)
	c.ops()
	ev := func() map[string]any {
		var m map[string]any
		_ = json.Unmarshal(e2etest.GoodEvent(app.ID, e2etest.UUID()), &m)
		m["occurred_at"] = time.Now().UTC().Format(time.RFC3339Nano)
		m["threats"] = []any{"root", map[string]any{"type": "hook", "name": "frida"}}
		return m
	}
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }

	st, b := c.call(true, "POST", "/v1/events", app.Token, js(ev()), nil)
	c.want("one event", st, 202, b)
	// The investigation fields (issue 39): a session, a user, a language and
	// a location are accepted, and each bad one is refused by both.
	inv := func(field string, v any) map[string]any {
		m := ev()
		m["session"] = map[string]any{"id": "contract-session"}
		m["user"] = map[string]any{"id": "contract-user"}
		m["location"] = map[string]any{"lat": 48.13743, "lon": 11.57549, "accuracy_m": 20}
		m["device"].(map[string]any)["language"] = "de-DE"
		if field != "" {
			m[field] = v
		}
		return m
	}
	st, b = c.call(true, "POST", "/v1/events", app.Token, js(inv("", nil)), nil)
	c.want("an event with session, user, language and location", st, 202, b)
	for _, tc := range []struct {
		what, field string
		v           any
	}{
		{"a session id of 129 bytes", "session", map[string]any{"id": strings.Repeat("s", 129)}},
		{"lat 91", "location", map[string]any{"lat": 91, "lon": 0}},
		{"a user id that is an object", "user", map[string]any{"id": map[string]any{"email": "a@b"}}},
	} {
		st, b := c.call(false, "POST", "/v1/events", app.Token, js(inv(tc.field, tc.v)), nil)
		c.want(tc.what, st, 422, b)
	}
	longLang := inv("", nil)
	longLang["device"].(map[string]any)["language"] = strings.Repeat("a", 200)
	st, b = c.call(false, "POST", "/v1/events", app.Token, js(longLang), nil)
	c.want("a language of 200 bytes", st, 422, b)
	batch := js(map[string]any{"events": []any{ev(), ev(), ev()}})
	st, b = c.call(true, "POST", "/v1/events", app.Token, gz(t, batch), map[string]string{"Content-Encoding": "gzip", "X-Request-ID": "contract-test-1"})
	c.want("a gzipped batch", st, 202, b)

	// Idempotency-Key: the same request sent twice gets the same ids.
	noID := ev()
	delete(noID, "event_id")
	key := map[string]string{"Idempotency-Key": e2etest.Name("contract-key")}
	st1, b1 := c.call(true, "POST", "/v1/events", app.Token, js(noID), key)
	st2, b2 := c.call(true, "POST", "/v1/events", app.Token, js(noID), key)
	c.want("an Idempotency-Key", st1, 202, b1)
	if st2 != 202 || string(b1) != string(b2) {
		t.Errorf("the same request with the same Idempotency-Key answered %d %s, then %d %s; want the same ids", st1, b1, st2, b2)
	}
	st, b = c.call(false, "POST", "/v1/events", app.Token, js(noID), map[string]string{"Idempotency-Key": "not a token"})
	c.want("a bad Idempotency-Key", st, 422, b)

	// Bad input: the service refuses it, and so does the document.
	unknown := ev()
	unknown["colour"] = "red"
	noType := ev()
	delete(noType, "type")
	badID := ev()
	badID["event_id"] = "not-a-uuid"
	badDevice := ev()
	badDevice["device"] = map[string]any{"model": "x", "ram": 8}
	many := make([]any, 501)
	for i := range many {
		many[i] = ev()
	}
	for _, tc := range []struct {
		what   string
		status int
		body   []byte
		header map[string]string
	}{
		{"not JSON", 400, []byte(`{"type":`), nil},
		{"an unknown field", 422, js(unknown), nil},
		{"no type", 422, js(noType), nil},
		{"a bad event_id", 422, js(badID), nil},
		{"an unknown device field", 422, js(badDevice), nil},
		{"501 events", 413, js(map[string]any{"events": many}), nil},
		{"an empty batch", 422, js(map[string]any{"events": []any{}}), nil},
		{"text/plain", 415, js(ev()), map[string]string{"Content-Type": "text/plain"}},
		{"brotli", 415, js(ev()), map[string]string{"Content-Encoding": "br"}},
	} {
		st, b := c.call(false, "POST", "/v1/events", app.Token, tc.body, tc.header)
		c.want(tc.what, st, tc.status, b)
	}
	// Refused for who sends it: the body itself is one the document allows.
	other := ev()
	other["app"] = map[string]any{"id": "someone-else"}
	st, b = c.call(true, "POST", "/v1/events", app.Token, js(other), nil)
	c.want("another app's event", st, 403, b)
	st, b = c.call(true, "POST", "/v1/events", "tv_not-a-real-token", js(ev()), nil)
	c.want("an unknown token", st, 401, b)
	st, b = c.call(false, "POST", "/v1/events", "", js(ev()), nil)
	c.want("no token", st, 401, b)
	st, b = c.call(false, "GET", "/v1/events", app.Token, nil, nil)
	c.want("GET /v1/events", st, 405, b)
	t.Log(c.spec.report())
	if u := c.spec.unexercised(); len(u) > 0 {
		t.Errorf("operations never answered with a 2xx: %v", u)
	}
}

func TestConformance_Tokens(t *testing.T) {
	env := e2etest.MustEnv(t)
	c := newCaller(t, "tokens", env.TokensURL)
	c.ops()
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	appID := e2etest.Name("contract")

	st, b := c.call(true, "POST", "/v1/tokens", env.AdminKey, js(map[string]string{"app_id": appID, "name": "contract test"}), nil)
	c.want("create", st, 201, b)
	var created struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(b, &created); err != nil || created.ID == "" {
		t.Fatalf("create answered %s: %v", b, err)
	}
	for _, tc := range []struct {
		what   string
		status int
		body   []byte
	}{
		{"not JSON", 400, []byte(`{"app_id":`)},
		{"an unknown field", 422, js(map[string]string{"app_id": appID, "colour": "red"})},
		{"a bad app_id", 422, js(map[string]string{"app_id": "no spaces please"})},
		{"a body over 16 KiB", 413, js(map[string]string{"app_id": appID, "name": strings.Repeat("x", 17<<10)})},
	} {
		st, b := c.call(false, "POST", "/v1/tokens", env.AdminKey, tc.body, nil)
		c.want("create with "+tc.what, st, tc.status, b)
	}
	st, b = c.call(false, "POST", "/v1/tokens", "", js(map[string]string{"app_id": appID}), nil)
	c.want("create without a key", st, 401, b)
	st, b = c.call(true, "POST", "/v1/tokens", "wrong-key", js(map[string]string{"app_id": appID}), nil)
	c.want("create with a wrong key", st, 401, b)

	st, b = c.call(true, "GET", "/v1/tokens?app_id="+appID+"&limit=5", env.AdminKey, nil, nil)
	c.want("list", st, 200, b)
	if !strings.Contains(string(b), created.ID) {
		t.Errorf("list for %s lacks the new token: %s", appID, b)
	}
	st, b = c.call(false, "GET", "/v1/tokens?limit=0", env.AdminKey, nil, nil)
	c.want("list with limit=0", st, 400, b)
	st, b = c.call(true, "GET", "/v1/tokens/"+created.ID, env.AdminKey, nil, nil)
	c.want("get", st, 200, b)
	st, b = c.call(true, "GET", "/v1/tokens/not-a-uuid", env.AdminKey, nil, nil)
	c.want("get a malformed id", st, 400, b)
	st, b = c.call(true, "GET", "/v1/tokens/"+e2etest.UUID(), env.AdminKey, nil, nil)
	c.want("get an unknown id", st, 404, b)

	st, b = c.call(true, "POST", "/v1/introspect", env.InternalKey, js(map[string]string{"token": created.Token}), nil)
	c.want("introspect", st, 200, b)
	if !strings.Contains(string(b), `"active":true`) {
		t.Errorf("introspect of a new token: %s", b)
	}
	st, b = c.call(true, "POST", "/v1/introspect", env.AdminKey, js(map[string]string{"token": created.Token}), nil)
	c.want("introspect with the admin key", st, 401, b)
	st, b = c.call(false, "POST", "/v1/introspect", env.InternalKey, js(map[string]string{"token": "x", "extra": "y"}), nil)
	c.want("introspect with an unknown field", st, 422, b)

	// The collectors' warm-up list names the new token by the SHA-256 of
	// its plain form, never the plain token.
	st, b = c.call(true, "GET", "/v1/introspect/active", env.InternalKey, nil, nil)
	c.want("list active", st, 200, b)
	sum := sha256.Sum256([]byte(created.Token))
	if !strings.Contains(string(b), hex.EncodeToString(sum[:])) || strings.Contains(string(b), created.Token) {
		t.Errorf("list active: want the new token by hash only, got %.300s", b)
	}
	st, b = c.call(true, "GET", "/v1/introspect/active?limit=1", env.InternalKey, nil, nil)
	c.want("list active with limit=1", st, 200, b)
	if n := strings.Count(string(b), `"token_sha256"`); n != 1 {
		t.Errorf("list active with limit=1 listed %d tokens: %.300s", n, b)
	}
	st, b = c.call(false, "GET", "/v1/introspect/active?limit=0", env.InternalKey, nil, nil)
	c.want("list active with limit=0", st, 400, b)
	st, b = c.call(true, "GET", "/v1/introspect/active", env.AdminKey, nil, nil)
	c.want("list active with the admin key", st, 401, b)

	st, b = c.call(true, "DELETE", "/v1/tokens/"+created.ID, env.AdminKey, nil, nil)
	c.want("revoke", st, 204, b)
	st, b = c.call(true, "DELETE", "/v1/tokens/"+e2etest.UUID(), env.AdminKey, nil, nil)
	c.want("revoke an unknown id", st, 404, b)
	st, b = c.call(true, "POST", "/v1/introspect", env.InternalKey, js(map[string]string{"token": created.Token}), nil)
	c.want("introspect a revoked token", st, 200, b)
	if !strings.Contains(string(b), `"active":false`) {
		t.Errorf("introspect of a revoked token: %s", b)
	}
	t.Log(c.spec.report())
	if u := c.spec.unexercised(); len(u) > 0 {
		t.Errorf("operations never answered with a 2xx: %v", u)
	}
}

func TestConformance_AuditLogger(t *testing.T) {
	env := e2etest.MustEnv(t)
	c := newCaller(t, "auditlogger", env.AuditURL)
	c.ops()
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	actor := e2etest.Name("contract")
	rec := func() map[string]any {
		return map[string]any{"id": e2etest.UUID(), "time": time.Now().UTC().Format(time.RFC3339Nano),
			"actor_app_id": actor, "action": "contract.test", "resource": "/v1/contract", "outcome": 202,
			"client_ip": "127.0.0.1", "event_count": 1}
	}
	first := rec()
	st, b := c.call(true, "POST", "/v1/audit", env.InternalKey, js(first), nil)
	c.want("one record", st, 202, b)
	st, b = c.call(true, "POST", "/v1/audit", env.InternalKey, js(map[string]any{"v": 1, "records": []any{rec(), rec()}}), nil)
	c.want("a batch", st, 202, b)
	badID := rec()
	badID["id"] = "nope"
	st, b = c.call(false, "POST", "/v1/audit", env.InternalKey, js(badID), nil)
	c.want("a bad id", st, 422, b)
	st, b = c.call(false, "POST", "/v1/audit", env.InternalKey, []byte(`[`), nil)
	c.want("not JSON", st, 400, b)
	st, b = c.call(false, "POST", "/v1/audit", env.InternalKey, js(rec()), map[string]string{"Content-Type": "text/plain"})
	c.want("text/plain", st, 415, b)
	st, b = c.call(true, "POST", "/v1/audit", env.AdminKey, js(rec()), nil)
	c.want("post with the admin key", st, 401, b)

	// The records are written by the audit worker: wait for them.
	var page []byte
	err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		st, b := c.call(true, "GET", "/v1/audit?app_id="+actor+"&action=contract.test&limit=2", env.AdminKey, nil, nil)
		page = b
		return st == 200 && strings.Contains(string(b), `"next_cursor"`), fmt.Errorf("status %d %.200s", st, b)
	})
	if err != nil {
		t.Fatalf("query: 3 records of %s never paged by 2: %v", actor, err)
	}
	var p struct {
		Next string `json:"next_cursor"`
	}
	_ = json.Unmarshal(page, &p)
	st, b = c.call(true, "GET", "/v1/audit?app_id="+actor+"&limit=2&cursor="+p.Next, env.AdminKey, nil, nil)
	c.want("the next page", st, 200, b)
	st, b = c.call(false, "GET", "/v1/audit?from=yesterday", env.AdminKey, nil, nil)
	c.want("a bad from", st, 400, b)
	st, b = c.call(false, "GET", "/v1/audit?colour=red", env.AdminKey, nil, nil)
	c.want("an unknown parameter", st, 400, b)
	st, b = c.call(false, "GET", "/v1/audit", "", nil, nil)
	c.want("no key", st, 401, b)
	auditTrail(t, c, env.AdminKey, first["id"].(string))
	t.Log(c.spec.report())
	if u := c.spec.unexercised(); len(u) > 0 {
		t.Errorf("operations never answered with a 2xx: %v", u)
	}
}

// auditTrail exercises the tamper-evidence endpoints of the running audit
// logger (the local stack signs a checkpoint every 10 s): id is a stored
// row's.
func auditTrail(t *testing.T, c *caller, adminKey, id string) {
	t.Helper()
	st, b := c.call(true, "GET", "/v1/audit/keys", "", nil, nil)
	c.want("keys", st, 200, b)
	if !strings.Contains(string(b), `"alg":"Ed25519"`) {
		t.Errorf("keys: no Ed25519 key in %.300s", b)
	}

	// The row is stored; a checkpoint covers it within a few seconds.
	var proof struct {
		Record     struct{ ID string }
		Seq        int64
		Checkpoint struct{ N, Size int64 }
		Proof      [][]byte
	}
	err := e2etest.WaitFor(45*time.Second, func() (bool, error) {
		st, b := c.call(true, "GET", "/v1/audit/"+id+"/proof", adminKey, nil, nil)
		if st != 200 {
			return false, fmt.Errorf("status %d %.200s", st, b)
		}
		return true, json.Unmarshal(b, &proof)
	})
	if err != nil {
		t.Fatalf("proof of row %s: %v", id, err)
	}
	if proof.Record.ID != id || proof.Seq >= proof.Checkpoint.Size || proof.Checkpoint.N < 1 {
		t.Errorf("proof of row %s: record %s at %d against checkpoint %d of size %d", id,
			proof.Record.ID, proof.Seq, proof.Checkpoint.N, proof.Checkpoint.Size)
	}
	latest := strconv.FormatInt(proof.Checkpoint.N, 10)

	st, b = c.call(true, "GET", "/v1/audit/checkpoints?limit=1", adminKey, nil, nil)
	c.want("checkpoints", st, 200, b)
	var page struct {
		Checkpoints []struct{ N, Size int64 }
		Latest      struct{ N int64 }
	}
	if err := json.Unmarshal(b, &page); err != nil || len(page.Checkpoints) != 1 || page.Latest.N < proof.Checkpoint.N {
		t.Errorf("checkpoints?limit=1: want one and the latest at or after %s, got %.300s (%v)", latest, b, err)
	}
	oldest := int64(1)
	if len(page.Checkpoints) == 1 {
		oldest = page.Checkpoints[0].N
	}
	st, b = c.call(true, "GET", fmt.Sprintf("/v1/audit/checkpoints/consistency?from=%d&to=%s", oldest, latest), adminKey, nil, nil)
	c.want("consistency", st, 200, b)
	st, b = c.call(true, "GET", fmt.Sprintf("/v1/audit/checkpoints/consistency?from=%d", oldest), adminKey, nil, nil)
	c.want("consistency with the latest", st, 200, b)
	if len(page.Checkpoints) == 1 && page.Checkpoints[0].Size <= proof.Seq {
		st, b = c.call(true, "GET", fmt.Sprintf("/v1/audit/%s/proof?checkpoint=%d", id, oldest), adminKey, nil, nil)
		c.want("a proof against a checkpoint older than the row", st, 409, b)
		st, b = c.call(true, "GET", fmt.Sprintf("/v1/audit/checkpoints/consistency?from=%s&to=%d", latest, oldest), adminKey, nil, nil)
		c.want("consistency to a smaller tree", st, 400, b)
	}

	st, b = c.call(true, "GET", "/v1/audit/verify?from="+time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), adminKey, nil, nil)
	for st == 503 && strings.Contains(string(b), `"busy"`) { // another verification runs on this replica
		time.Sleep(time.Second)
		st, b = c.call(true, "GET", "/v1/audit/verify?from="+time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), adminKey, nil, nil)
	}
	c.want("verify", st, 200, b)
	if !strings.Contains(string(b), `"ok":true`) {
		t.Errorf("verify: the trail does not verify: %.3000s", b) // the problems follow the checkpoint: keep them
	}

	for _, tc := range []struct {
		what, path string
		valid      bool
		status     int
	}{
		{"checkpoints with limit=0", "/v1/audit/checkpoints?limit=0", false, 400},
		{"consistency without from", "/v1/audit/checkpoints/consistency", false, 400},
		{"consistency from an unknown checkpoint", "/v1/audit/checkpoints/consistency?from=999999999", true, 404},
		{"a proof of a malformed id", "/v1/audit/not-a-uuid/proof", false, 400},
		{"a proof of an unknown row", "/v1/audit/" + e2etest.UUID() + "/proof", true, 404},
		{"verify with a bad from", "/v1/audit/verify?from=yesterday", false, 400},
	} {
		st, b := c.call(tc.valid, "GET", tc.path, adminKey, nil, nil)
		c.want(tc.what, st, tc.status, b)
	}
	st, b = c.call(false, "GET", "/v1/audit/checkpoints", "", nil, nil)
	c.want("checkpoints without a key", st, 401, b)
}
