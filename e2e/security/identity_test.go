package security

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// identityEnv is the running identity service and its first admin.
type identityEnv struct {
	e2etest.Env
	IdentityURL, RendererURL string
	adminUser, adminPassword string
}

func mustIdentity(t *testing.T) identityEnv {
	t.Helper()
	return identityEnv{
		Env:           e2etest.MustEnv(t),
		IdentityURL:   testenv.MustEnv(t, "THREATVIEW_IDENTITY_URL"),
		RendererURL:   os.Getenv("THREATVIEW_RENDERER_URL"),
		adminUser:     testenv.MustEnv(t, "THREATVIEW_ADMIN_USER"),
		adminPassword: testenv.MustEnv(t, "THREATVIEW_ADMIN_PASSWORD"),
	}
}

type identitySession struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

// fromAddr names a client address through the identity service's trusted
// proxy (the local stack trusts loopback), so throttling by address in one
// test does not lock out the others.
func fromAddr(ip string) map[string]string { return map[string]string{"X-Forwarded-For": ip} }

func randomAddr() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("10.%d.%d.%d", b[0], b[1], b[2]|1)
}

func (e identityEnv) login(t *testing.T, user, password string) identitySession {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"username": user, "password": password})
	r := e2etest.Do(t, http.MethodPost, e.IdentityURL+"/v1/login", "", body, fromAddr(randomAddr()))
	if r.Status != http.StatusOK {
		t.Fatalf("sign-in of %s: %d %s", user, r.Status, r.Body)
	}
	var s identitySession
	if err := json.Unmarshal(r.Body, &s); err != nil || s.AccessToken == "" || s.RefreshToken == "" {
		t.Fatalf("sign-in of %s answered %s", user, r.Body)
	}
	return s
}

// person creates a person with roles as the first admin and deletes them
// when the test ends; it returns the username and password.
func (e identityEnv) person(t *testing.T, admin, prefix string, roles ...string) (string, string) {
	t.Helper()
	name := e2etest.Name(prefix)
	password := "pw-" + hex.EncodeToString([]byte(e2etest.UUID()))[:24]
	body, _ := json.Marshal(map[string]any{"username": name, "password": password, "roles": roles})
	if r := e2etest.Do(t, http.MethodPost, e.IdentityURL+"/v1/users", admin, body, nil); r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
	}
	t.Cleanup(func() {
		e2etest.TryDo(http.MethodDelete, e.IdentityURL+"/v1/users/"+name, e.AdminKey, nil, nil) //nolint:errcheck // best effort
	})
	return name, password
}

// forged is an access token with every claim right but signed by a key the
// identity service never had.
func forged(t *testing.T, user string, roles ...string) string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"EdDSA","kid":"forged","typ":"JWT"}`))
	now := time.Now().Unix()
	claims, _ := json.Marshal(map[string]any{"iss": "threatview-identity", "aud": []string{"threatview"}, "sub": user,
		"roles": roles, "iat": now, "nbf": now, "exp": now + 300})
	payload := enc.EncodeToString(claims)
	return head + "." + payload + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(head+"."+payload)))
}

// tampered changes one claim of a genuine token, keeping its signature.
func tampered(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	_ = json.Unmarshal(raw, &claims)
	claims["roles"] = []string{"admin"}
	raw, _ = json.Marshal(claims)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
}

// TestIdentity_Roles signs people in with each role and checks what every
// service lets them do: an analyst reads stats but may not create a token
// or read the audit trail; an auditor reads the audit trail but not stats;
// a token created by a signed-in admin is audited with the person as actor;
// tampered and forged tokens get 401 everywhere.
func TestIdentity_Roles(t *testing.T) {
	e := mustIdentity(t)
	admin := e.login(t, e.adminUser, e.adminPassword).AccessToken
	analystName, analystPw := e.person(t, admin, "e2e-analyst", "analyst")
	auditorName, auditorPw := e.person(t, admin, "e2e-auditor", "auditor")
	adminName, adminPw := e.person(t, admin, "e2e-admin", "admin")
	analyst := e.login(t, analystName, analystPw).AccessToken
	auditor := e.login(t, auditorName, auditorPw).AccessToken
	person := e.login(t, adminName, adminPw).AccessToken

	from := url.QueryEscape(time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339))
	to := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	stats := e.RendererURL + "/v1/stats/country?granularity=hour&from=" + from + "&to=" + to
	type call struct {
		name, method, url, body string
		status                  map[string]int // by caller
	}
	calls := []call{
		{"create token", http.MethodPost, e.TokensURL + "/v1/tokens", `{"app_id":"e2e-roles"}`, map[string]int{"analyst": 403, "auditor": 403}},
		{"list tokens", http.MethodGet, e.TokensURL + "/v1/tokens?limit=1", "", map[string]int{"analyst": 403, "auditor": 403, "admin": 200}},
		{"read audit", http.MethodGet, e.AuditURL + "/v1/audit?limit=1", "", map[string]int{"analyst": 403, "auditor": 200, "admin": 200}},
		{"list users", http.MethodGet, e.IdentityURL + "/v1/users", "", map[string]int{"analyst": 403, "auditor": 403, "admin": 200}},
		{"me", http.MethodGet, e.IdentityURL + "/v1/me", "", map[string]int{"analyst": 200, "auditor": 200, "admin": 200}},
	}
	if e.RendererURL != "" {
		calls = append(calls, call{"read stats", http.MethodGet, stats, "", map[string]int{"analyst": 200, "auditor": 403, "admin": 200}})
	} else if testenv.Required() {
		t.Fatal("THREATVIEW_RENDERER_URL is not set")
	}
	callers := map[string]string{"analyst": analyst, "auditor": auditor, "admin": person}
	for _, c := range calls {
		for who, want := range c.status {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			r := e2etest.Do(t, c.method, c.url, callers[who], body, nil)
			if want >= 400 {
				e2etest.CheckError(t, who+" "+c.name, r, want)
			} else if r.Status != want {
				t.Errorf("%s %s: %d %.200s, want %d", who, c.name, r.Status, r.Body, want)
			}
		}
		for name, tok := range map[string]string{"tampered": tampered(t, analyst), "forged": forged(t, e.adminUser, "admin")} {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			r := e2etest.Do(t, c.method, c.url, tok, body, nil)
			e2etest.CheckError(t, name+" token "+c.name, r, http.StatusUnauthorized)
		}
	}

	t.Run("TokenCreationAuditedAsThePerson", func(t *testing.T) {
		app := e2etest.Name("e2e-actor")
		r := e2etest.Do(t, http.MethodPost, e.TokensURL+"/v1/tokens", person, []byte(`{"app_id":"`+app+`"}`), nil)
		if r.Status != http.StatusCreated {
			t.Fatalf("create token as %s: %d %s", adminName, r.Status, r.Body)
		}
		var tok struct{ ID string }
		_ = json.Unmarshal(r.Body, &tok)
		err := e2etest.WaitFor(20*time.Second, func() (bool, error) {
			r, err := e2etest.TryDo(http.MethodGet, e.AuditURL+"/v1/audit?action=tokens.create&actor="+adminName+"&from="+from, auditor, nil, nil)
			if err != nil || r.Status != http.StatusOK {
				return false, err
			}
			return bytes.Contains(r.Body, []byte(`"resource":"token:`+tok.ID+`"`)), nil
		})
		if err != nil {
			t.Fatalf("no tokens.create audit row with actor %s for token %s: %v", adminName, tok.ID, err)
		}
	})

	t.Run("DisabledCannotSignIn", func(t *testing.T) {
		name, pw := e.person(t, admin, "e2e-disabled", "analyst")
		s := e.login(t, name, pw)
		if r := e2etest.Do(t, http.MethodPatch, e.IdentityURL+"/v1/users/"+name, admin, []byte(`{"disabled":true}`), nil); r.Status != http.StatusOK {
			t.Fatalf("disable: %d %s", r.Status, r.Body)
		}
		body, _ := json.Marshal(map[string]string{"username": name, "password": pw})
		e2etest.CheckError(t, "sign-in of a disabled person", e2etest.Do(t, http.MethodPost, e.IdentityURL+"/v1/login", "", body, fromAddr(randomAddr())), 401)
		body, _ = json.Marshal(map[string]string{"refresh_token": s.RefreshToken})
		e2etest.CheckError(t, "refresh of a disabled person", e2etest.Do(t, http.MethodPost, e.IdentityURL+"/v1/refresh", "", body, nil), 401)
	})
}

// TestIdentity_Throttling fails sign-ins for one person from changing
// addresses, then for many usernames from one address: both get 429 with
// Retry-After, even with the right password.
func TestIdentity_Throttling(t *testing.T) {
	e := mustIdentity(t)
	admin := e.login(t, e.adminUser, e.adminPassword).AccessToken
	name, pw := e.person(t, admin, "e2e-throttle", "analyst")
	try := func(user, password, addr string) e2etest.Response {
		body, _ := json.Marshal(map[string]string{"username": user, "password": password})
		return e2etest.Do(t, http.MethodPost, e.IdentityURL+"/v1/login", "", body, fromAddr(addr))
	}
	var last e2etest.Response
	for i := 0; i < 50; i++ {
		if last = try(name, "wrong password", randomAddr()); last.Status == http.StatusTooManyRequests {
			break
		}
		e2etest.CheckError(t, "wrong password", last, http.StatusUnauthorized)
	}
	e2etest.CheckError(t, "repeated wrong passwords for one person", last, http.StatusTooManyRequests)
	r := try(name, pw, randomAddr())
	e2etest.CheckError(t, "right password after the lockout", r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}

	other, otherPw := e.person(t, admin, "e2e-throttle-ip", "analyst")
	addr := randomAddr()
	for i := 0; i < 500; i++ { // the limit is 20 by default, 100 in the local stack
		if last = try(e2etest.Name("e2e-nobody"), "wrong password", addr); last.Status == http.StatusTooManyRequests {
			break
		}
	}
	e2etest.CheckError(t, "password spraying from one address", last, http.StatusTooManyRequests)
	e2etest.CheckError(t, "right password from the spraying address", try(other, otherPw, addr), http.StatusTooManyRequests)
	if r := try(other, otherPw, randomAddr()); r.Status != http.StatusOK {
		t.Errorf("right password from another address: %d %s", r.Status, r.Body)
	}
}

// TestIdentity_NoEnumeration compares a wrong password for a real person
// with any password for an unknown username: same status and body, and
// about the same time.
func TestIdentity_NoEnumeration(t *testing.T) {
	e := mustIdentity(t)
	admin := e.login(t, e.adminUser, e.adminPassword).AccessToken
	name, _ := e.person(t, admin, "e2e-enum", "analyst")
	name2, _ := e.person(t, admin, "e2e-enum", "analyst")
	ghost, ghost2 := e2etest.Name("e2e-ghost"), e2etest.Name("e2e-ghost")
	group := map[string]string{name: name, name2: name, ghost: ghost, ghost2: ghost}
	bodies := map[string][]byte{}
	times := map[string][]time.Duration{}
	// Interleaved, so a load spike hits both; 4 tries stay below the
	// per-person limit.
	for range 4 {
		for _, user := range []string{name, ghost, name2, ghost2} {
			b, _ := json.Marshal(map[string]string{"username": user, "password": "not the password"})
			start := time.Now()
			r := e2etest.Do(t, http.MethodPost, e.IdentityURL+"/v1/login", "", b, fromAddr(randomAddr()))
			times[group[user]] = append(times[group[user]], time.Since(start))
			e2etest.CheckError(t, "failed sign-in of "+user, r, http.StatusUnauthorized)
			bodies[group[user]] = r.Body
		}
	}
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	realBody, realTime := bodies[name], median(times[name])
	unknownBody, unknownTime := bodies[ghost], median(times[ghost])
	if !bytes.Equal(realBody, unknownBody) {
		t.Errorf("answers differ: wrong password %s, unknown user %s", realBody, unknownBody)
	}
	// Without the dummy hash the ratio would be about 0.05 (no argon2 at all).
	if r := float64(unknownTime) / float64(realTime); r < 0.25 || r > 4 {
		t.Errorf("median time: unknown user %s, wrong password %s (ratio %.2f): the difference tells who exists", unknownTime, realTime, r)
	}
}

// TestIdentity_NoSecretInBodiesOrLogs signs in, refreshes, changes a
// password and logs out, with right and wrong secrets, and checks that no
// password (right or wrong), refresh token or access token comes back where
// it does not belong or reaches any log under .run/log.
func TestIdentity_NoSecretInBodiesOrLogs(t *testing.T) {
	e := mustIdentity(t)
	admin := e.login(t, e.adminUser, e.adminPassword)
	name, pw := e.person(t, admin.AccessToken, "e2e-secrets", "analyst")
	wrongPw := "wrong-" + hex.EncodeToString([]byte(e2etest.UUID()))[:20]
	newPw := "new-" + hex.EncodeToString([]byte(e2etest.UUID()))[:20]
	s := e.login(t, name, pw)
	secrets := map[string]string{"password": pw, "wrong password": wrongPw, "new password": newPw,
		"first admin password": e.adminPassword, "refresh token": s.RefreshToken, "access token": s.AccessToken,
		"admin refresh token": admin.RefreshToken, "admin access token": admin.AccessToken}
	j := func(v any) []byte { b, _ := json.Marshal(v); return b }
	calls := []struct {
		method, url, auth string
		body              []byte
	}{
		{http.MethodPost, e.IdentityURL + "/v1/login", "", j(map[string]string{"username": name, "password": wrongPw})},
		{http.MethodPost, e.IdentityURL + "/v1/login", "", j(map[string]string{"username": wrongPw, "password": pw})},
		{http.MethodPost, e.IdentityURL + "/v1/login", "", j(map[string]any{"username": name, "password": pw, pw: 1})},
		{http.MethodPost, e.IdentityURL + "/v1/login", "", []byte(`{"username":"` + name + `","password":` + pw + `}`)},
		{http.MethodPost, e.IdentityURL + "/v1/users", admin.AccessToken, j(map[string]any{"username": "x", "password": "short", "roles": []string{pw}})},
		{http.MethodPost, e.IdentityURL + "/v1/me/password", s.AccessToken, j(map[string]string{"current_password": wrongPw, "new_password": newPw})},
		{http.MethodPost, e.IdentityURL + "/v1/me/password", s.AccessToken, j(map[string]string{"current_password": pw, "new_password": newPw})},
		{http.MethodGet, e.IdentityURL + "/v1/me", s.AccessToken, nil},
		{http.MethodGet, e.IdentityURL + "/v1/users", admin.AccessToken, nil},
		{http.MethodGet, e.IdentityURL + "/v1/users/" + name, admin.AccessToken, nil},
		{http.MethodPost, e.IdentityURL + "/v1/refresh", "", j(map[string]string{"refresh_token": s.RefreshToken})},
		{http.MethodPost, e.IdentityURL + "/v1/logout", "", j(map[string]string{"refresh_token": s.RefreshToken + "x"})},
		{http.MethodPost, e.IdentityURL + "/v1/logout", "", j(map[string]string{"refresh_token": s.RefreshToken})},
		{http.MethodGet, e.TokensURL + "/v1/tokens?limit=1", s.AccessToken, nil},
		{http.MethodGet, e.AuditURL + "/v1/audit?actor=" + url.QueryEscape(s.AccessToken), admin.AccessToken, nil},
	}
	for _, c := range calls {
		r := e2etest.Do(t, c.method, c.url, c.auth, c.body, fromAddr(randomAddr()))
		for what, secret := range secrets {
			if bytes.Contains(r.Body, []byte(secret)) {
				t.Errorf("%s %s answered %d with the %s in the body", c.method, c.url, r.Status, what)
			}
		}
		if c.method == http.MethodPost && strings.HasSuffix(c.url, "/v1/login") && r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("POST /v1/login answered Cache-Control %q, want no-store", r.Header.Get("Cache-Control"))
		}
	}
	// Give the audit trail's worker time to write what it received.
	time.Sleep(500 * time.Millisecond)
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
			for what, secret := range secrets {
				if bytes.Contains(sc.Bytes(), []byte(secret)) {
					t.Errorf("%s:%d holds the %s", filepath.Base(path), line, what)
				}
			}
		}
		f.Close()
	}
}

// TestIdentity_StoredOnlyHashed reads the identity database after a sign-in:
// the password is there only as an argon2id hash, the refresh token only as
// its SHA-256, and neither appears in plain anywhere.
func TestIdentity_StoredOnlyHashed(t *testing.T) {
	e := mustIdentity(t)
	db := e2etest.MariaDB(t, testenv.MustEnv(t, "IDENTITY_DATABASE_DSN"))
	admin := e.login(t, e.adminUser, e.adminPassword).AccessToken
	name, pw := e.person(t, admin, "e2e-hashed", "analyst")
	s := e.login(t, name, pw)

	var hash, roles string
	if err := db.QueryRow("SELECT password_hash, roles FROM users WHERE username = ?", name).Scan(&hash, &roles); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$") || strings.Contains(hash, pw) || roles != "analyst" {
		t.Fatalf("stored user: hash %.20q…, roles %q; want an argon2id hash and analyst", hash, roles)
	}
	sum := sha256.Sum256([]byte(s.RefreshToken))
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM refresh_tokens WHERE token_hash = ? AND username = ?", sum[:], name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("refresh tokens stored under the SHA-256 of the plain one: %d, %v; want 1", n, err)
	}
	// No column of any table holds a plain secret.
	for _, q := range []string{"SELECT CONCAT_WS('|', username, password_hash, roles) FROM users",
		"SELECT CONCAT_WS('|', HEX(token_hash), family_id, username) FROM refresh_tokens"} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row string
			_ = rows.Scan(&row)
			for what, secret := range map[string]string{"password": pw, "refresh token": s.RefreshToken, "access token": s.AccessToken} {
				if strings.Contains(row, secret) || strings.Contains(strings.ToLower(row), strings.ToLower(hex.EncodeToString([]byte(secret)))) {
					t.Errorf("%s: a row holds the %s", q, what)
				}
			}
		}
		rows.Close()
	}
}
