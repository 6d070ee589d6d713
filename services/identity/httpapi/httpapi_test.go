package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/identity"
	"threatview/identity/httpapi"
	"threatview/identity/mariadb"
	"threatview/migrations"
	"threatview/platform/auditclient"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
)

// server is the identity API on a fresh database, auditing to the running
// audit logger.
type server struct {
	*httptest.Server
	store    *mariadb.Store
	adminKey string
	log      *testenv.SyncBuffer
}

// testArgon2 keeps hashing cheap under the race detector; the production
// parameters are exercised in TestHasher.
var testArgon2 = identity.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}

func newServer(t *testing.T, opts identity.Options, api httpapi.Options) *server {
	t.Helper()
	dsn := testenv.MustMariaDB(t)
	auditURL := testenv.MustEnv(t, "THREATVIEW_AUDIT_URL")
	internalKey := testenv.MustEnv(t, "INTERNAL_KEY")
	db, err := mariadb.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(context.Background(), db, migrations.Identity); err != nil {
		t.Fatal(err)
	}
	store := mariadb.New(db)
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	keys, err := identity.ParseKeyring(hex.EncodeToString(seed))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := identity.NewHasher(testArgon2, 4)
	if err != nil {
		t.Fatal(err)
	}
	logBuf := &testenv.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logBuf, nil))
	svc := identity.NewService(store, hasher, keys, auditclient.New(auditURL, internalKey, auditclient.Options{Timeout: 5 * time.Second, Unavailable: identity.ErrAuditUnavailable}), opts, log)
	api.AdminKey = "identity-test-admin-key"
	h := httpapi.New(svc, api, httpserver.NewRegistry(), map[string]httpserver.Check{"database": store.Ping}, log)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{Server: srv, store: store, adminKey: api.AdminKey, log: logBuf}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (s *server) do(t *testing.T, method, path, bearer string, body any, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.URL+path, rd)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

func (r response) want(t *testing.T, what string, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s = %d %s, want %d", what, r.status, r.body, status)
	}
	if status >= 400 {
		var eb httpserver.ErrorBody
		if json.Unmarshal(r.body, &eb) != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s: body %s is not the JSON error", what, r.body)
		}
	}
}

type session struct {
	AccessToken  string    `json:"access_token"`
	ExpiresAt    time.Time `json:"expires_at"`
	RefreshToken string    `json:"refresh_token"`
	User         struct {
		Username string   `json:"username"`
		Roles    []string `json:"roles"`
	} `json:"user"`
}

func (s *server) createUser(t *testing.T, name, password string, roles ...string) {
	t.Helper()
	s.do(t, "POST", "/v1/users", s.adminKey, map[string]any{"username": name, "password": password, "roles": roles}).
		want(t, "POST /v1/users "+name, 201)
}

func (s *server) login(t *testing.T, name, password string) session {
	t.Helper()
	r := s.do(t, "POST", "/v1/login", "", map[string]string{"username": name, "password": password})
	r.want(t, "POST /v1/login "+name, 200)
	var sess session
	if err := json.Unmarshal(r.body, &sess); err != nil {
		t.Fatal(err)
	}
	return sess
}

const pw = "correct horse battery"

func TestLogin(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	s.createUser(t, "Alice", pw, "analyst")

	t.Run("OK", func(t *testing.T) {
		sess := s.login(t, "alice", pw)
		if sess.User.Username != "alice" || len(sess.User.Roles) != 1 || sess.User.Roles[0] != "analyst" {
			t.Fatalf("user = %+v, want alice [analyst]", sess.User)
		}
		if d := time.Until(sess.ExpiresAt); d <= 0 || d > identity.MaxAccessTTL+time.Second {
			t.Fatalf("expires in %s, want at most %s", d, identity.MaxAccessTTL)
		}
		r := s.do(t, "GET", "/v1/me", sess.AccessToken, nil)
		r.want(t, "GET /v1/me", 200)
		if !strings.Contains(string(r.body), `"username":"alice"`) || strings.Contains(string(r.body), "argon2") {
			t.Fatalf("GET /v1/me = %s", r.body)
		}
	})
	t.Run("NoEnumeration", func(t *testing.T) {
		wrong := s.do(t, "POST", "/v1/login", "", map[string]string{"username": "alice", "password": "wrong password!"})
		unknown := s.do(t, "POST", "/v1/login", "", map[string]string{"username": "nobody", "password": "wrong password!"})
		wrong.want(t, "wrong password", 401)
		unknown.want(t, "unknown user", 401)
		if !bytes.Equal(wrong.body, unknown.body) {
			t.Fatalf("bodies differ: %s vs %s", wrong.body, unknown.body)
		}
	})
	t.Run("Refresh", func(t *testing.T) {
		sess := s.login(t, "alice", pw)
		r := s.do(t, "POST", "/v1/refresh", "", map[string]string{"refresh_token": sess.RefreshToken})
		r.want(t, "POST /v1/refresh", 200)
		var next session
		_ = json.Unmarshal(r.body, &next)
		if next.RefreshToken == sess.RefreshToken || next.AccessToken == "" {
			t.Fatal("refresh did not rotate the refresh token")
		}
		// Reusing the old token is theft: it fails, and so does the new one.
		s.do(t, "POST", "/v1/refresh", "", map[string]string{"refresh_token": sess.RefreshToken}).want(t, "reused refresh", 401)
		s.do(t, "POST", "/v1/refresh", "", map[string]string{"refresh_token": next.RefreshToken}).want(t, "refresh after reuse", 401)
	})
	t.Run("Logout", func(t *testing.T) {
		sess := s.login(t, "alice", pw)
		s.do(t, "POST", "/v1/logout", "", map[string]string{"refresh_token": sess.RefreshToken}).want(t, "POST /v1/logout", 204)
		s.do(t, "POST", "/v1/refresh", "", map[string]string{"refresh_token": sess.RefreshToken}).want(t, "refresh after logout", 401)
	})
	t.Run("Disabled", func(t *testing.T) {
		s.createUser(t, "dora", pw, "auditor")
		sess := s.login(t, "dora", pw)
		s.do(t, "PATCH", "/v1/users/dora", s.adminKey, map[string]any{"disabled": true}).want(t, "disable", 200)
		r := s.do(t, "POST", "/v1/login", "", map[string]string{"username": "dora", "password": pw})
		r.want(t, "login of a disabled person", 401)
		s.do(t, "POST", "/v1/refresh", "", map[string]string{"refresh_token": sess.RefreshToken}).want(t, "refresh of a disabled person", 401)
		s.do(t, "GET", "/v1/me", sess.AccessToken, nil).want(t, "GET /v1/me of a disabled person", 401)
		s.do(t, "PATCH", "/v1/users/dora", s.adminKey, map[string]any{"disabled": false}).want(t, "enable", 200)
		s.login(t, "dora", pw)
	})
	t.Run("BadTokens", func(t *testing.T) {
		sess := s.login(t, "alice", pw)
		parts := strings.Split(sess.AccessToken, ".")
		sig := []byte(parts[2])
		sig[3] ^= 2
		for name, tok := range map[string]string{
			"Tampered": parts[0] + "." + parts[1] + "." + string(sig),
			"Garbage":  "a.b.c",
			"Refresh":  sess.RefreshToken,
		} {
			s.do(t, "GET", "/v1/me", tok, nil).want(t, name, 401)
		}
	})
	t.Run("PasswordChange", func(t *testing.T) {
		s.createUser(t, "pat", pw, "analyst")
		sess := s.login(t, "pat", pw)
		s.do(t, "POST", "/v1/me/password", sess.AccessToken, map[string]string{"current_password": "nope nope nope", "new_password": "a brand new password"}).
			want(t, "change with a wrong current password", 401)
		s.do(t, "POST", "/v1/me/password", sess.AccessToken, map[string]string{"current_password": pw, "new_password": "short"}).
			want(t, "change to a short password", 422)
		s.do(t, "POST", "/v1/me/password", sess.AccessToken, map[string]string{"current_password": pw, "new_password": "a brand new password"}).
			want(t, "change", 204)
		s.do(t, "POST", "/v1/login", "", map[string]string{"username": "pat", "password": pw}).want(t, "old password", 401)
		s.login(t, "pat", "a brand new password")
		s.do(t, "POST", "/v1/refresh", "", map[string]string{"refresh_token": sess.RefreshToken}).want(t, "refresh from before the change", 401)
	})
	if strings.Contains(s.log.String(), pw) || strings.Contains(s.log.String(), "a brand new password") {
		t.Fatalf("a password is in the log:\n%s", s.log)
	}
}

func TestUsers(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	s.createUser(t, "root", pw, "admin")
	s.createUser(t, "ann", pw, "analyst")
	admin := s.login(t, "root", pw).AccessToken
	analyst := s.login(t, "ann", pw).AccessToken

	t.Run("WrongRole", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{"GET", "/v1/users"}, {"POST", "/v1/users"}, {"GET", "/v1/users/root"},
			{"PATCH", "/v1/users/root"}, {"DELETE", "/v1/users/root"}, {"PUT", "/v1/users/root/password"},
		} {
			s.do(t, c.method, c.path, analyst, map[string]any{}).want(t, c.method+" "+c.path+" as analyst", 403)
			s.do(t, c.method, c.path, "", map[string]any{}).want(t, c.method+" "+c.path+" anonymous", 401)
		}
	})
	t.Run("Manage", func(t *testing.T) {
		r := s.do(t, "POST", "/v1/users", admin, map[string]any{"username": "bob", "password": pw, "roles": []string{"auditor", "analyst"}})
		r.want(t, "create bob", 201)
		if strings.Contains(string(r.body), "argon2") || strings.Contains(string(r.body), pw) {
			t.Fatalf("create answer shows a secret: %s", r.body)
		}
		s.do(t, "POST", "/v1/users", admin, map[string]any{"username": "bob", "password": pw, "roles": []string{}}).want(t, "create bob again", 409)
		s.do(t, "POST", "/v1/users", admin, map[string]any{"username": "eve", "password": pw, "roles": []string{"god"}}).want(t, "unknown role", 422)
		s.do(t, "POST", "/v1/users", admin, map[string]any{"username": "eve", "password": "short", "roles": []string{}}).want(t, "short password", 422)
		s.do(t, "POST", "/v1/users", admin, map[string]any{"username": "-eve", "password": pw}).want(t, "bad username", 422)
		s.do(t, "POST", "/v1/users", admin, map[string]any{"username": "eve", "password": pw, "extra": 1}).want(t, "unknown field", 422)
		r = s.do(t, "PATCH", "/v1/users/bob", admin, map[string]any{"roles": []string{"auditor"}})
		r.want(t, "change roles", 200)
		if !strings.Contains(string(r.body), `"roles":["auditor"]`) {
			t.Fatalf("PATCH = %s", r.body)
		}
		s.do(t, "PATCH", "/v1/users/root", admin, map[string]any{"disabled": true}).want(t, "disable yourself", 409)
		s.do(t, "PATCH", "/v1/users/root", admin, map[string]any{"roles": []string{"analyst"}}).want(t, "demote yourself", 409)
		s.do(t, "DELETE", "/v1/users/root", admin, nil).want(t, "delete yourself", 409)
		s.do(t, "PUT", "/v1/users/bob/password", admin, map[string]any{"password": "reset password 1"}).want(t, "reset", 204)
		s.login(t, "bob", "reset password 1")
		r = s.do(t, "GET", "/v1/users", admin, nil)
		r.want(t, "list", 200)
		for _, name := range []string{"root", "ann", "bob"} {
			if !strings.Contains(string(r.body), `"username":"`+name+`"`) {
				t.Fatalf("list lacks %s: %s", name, r.body)
			}
		}
		s.do(t, "DELETE", "/v1/users/bob", admin, nil).want(t, "delete bob", 204)
		s.do(t, "DELETE", "/v1/users/bob", admin, nil).want(t, "delete bob again", 404)
		s.do(t, "POST", "/v1/login", "", map[string]string{"username": "bob", "password": "reset password 1"}).want(t, "deleted person signs in", 401)
	})
}

func TestLogin_Throttle(t *testing.T) {
	s := newServer(t, identity.Options{MaxFailuresUser: 3, MaxFailuresIP: 5, FailureWindow: time.Minute},
		httpapi.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	s.createUser(t, "tom", pw, "analyst")
	s.createUser(t, "tim", pw, "analyst")
	login := func(name, password, ip string) response {
		return s.do(t, "POST", "/v1/login", "", map[string]string{"username": name, "password": password}, "X-Forwarded-For", ip)
	}
	t.Run("PerUser", func(t *testing.T) {
		for i := range 3 {
			login("tom", "wrong password "+string(rune('a'+i)), "10.0.0."+string(rune('1'+i))).want(t, "wrong password", 401)
		}
		// The right password from a fresh address is refused too: the
		// username is locked for the window.
		r := login("tom", pw, "10.0.1.1")
		r.want(t, "fourth attempt", 429)
		if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Fatalf("Retry-After = %q", ra)
		}
		login("tim", pw, "10.0.1.1").want(t, "another person", 200)
	})
	t.Run("ParallelGuesses", func(t *testing.T) {
		// Counted before the password is checked: a burst of parallel
		// guesses gets no more tries than a patient guesser.
		s.createUser(t, "pia", pw, "analyst")
		codes := make(chan int, 20)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes <- login("pia", "wrong password", fmt.Sprintf("10.1.%d.1", i)).status
			}()
		}
		wg.Wait()
		close(codes)
		got := map[int]int{}
		for c := range codes {
			got[c]++
		}
		if got[401] > 3 || got[401]+got[429] != 20 {
			t.Fatalf("20 parallel wrong passwords answered %v, want at most 3 × 401 and the rest 429", got)
		}
	})
	t.Run("PerAddress", func(t *testing.T) {
		for i := range 5 {
			login("nobody"+string(rune('a'+i)), "wrong password", "10.9.9.9").want(t, "spray", 401)
		}
		login("tim", pw, "10.9.9.9").want(t, "from the spraying address", 429)
		login("tim", pw, "10.9.9.10").want(t, "from another address", 200)
	})
}

func TestOIDC_NotConfigured(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	s.do(t, "GET", "/v1/oidc/login", "", nil).want(t, "GET /v1/oidc/login", 404)
}

func TestJWKS(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	r := s.do(t, "GET", "/.well-known/jwks.json", "", nil)
	r.want(t, "GET jwks", 200)
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(r.body, &set); err != nil || len(set.Keys) != 1 || set.Keys[0]["kty"] != "OKP" {
		t.Fatalf("JWK set = %s", r.body)
	}
	if _, private := set.Keys[0]["d"]; private {
		t.Fatalf("JWK set holds a private key: %s", r.body)
	}
}

// auditRows returns the audit logger's records for actor (read with the
// admin key of the stack).
func auditRows(t *testing.T, actor string) []map[string]any {
	t.Helper()
	base := testenv.MustEnv(t, "THREATVIEW_AUDIT_URL")
	req, _ := http.NewRequest("GET", base+"/v1/audit?actor="+url.QueryEscape(actor)+"&from="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), nil)
	req.Header.Set("Authorization", "Bearer "+os.Getenv("THREATVIEW_ADMIN_KEY"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Records []map[string]any `json:"records"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/audit = %d %s", resp.StatusCode, b)
	}
	_ = json.Unmarshal(b, &out)
	return out.Records
}

func TestAudit(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	root := "root-" + strings.ToLower(hex.EncodeToString([]byte(time.Now().Format("150405.000"))))
	s.createUser(t, root, pw, "admin")
	admin := s.login(t, root, pw).AccessToken
	s.do(t, "POST", "/v1/users", admin, map[string]any{"username": root + "-x", "password": pw, "roles": []string{"analyst"}}).want(t, "create", 201)
	s.do(t, "POST", "/v1/login", "", map[string]string{"username": root, "password": "not the password"}).want(t, "failed", 401)
	want := map[string]bool{identity.ActionLogin: false, identity.ActionUserCreate: false}
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, rec := range auditRows(t, root) {
			if a, _ := rec["action"].(string); a != "" {
				if _, ok := want[a]; ok {
					want[a] = true
				}
			}
			if b, _ := json.Marshal(rec); bytes.Contains(b, []byte(pw)) {
				t.Fatalf("audit record holds the password: %s", b)
			}
		}
		if want[identity.ActionLogin] && want[identity.ActionUserCreate] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit records with actor %s: found %v, want all", root, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestBadInput sends malformed requests: each gets its status with the JSON
// error, and nothing changes.
func TestBadInput(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	raw := func(method, path, body string) response {
		req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{resp.StatusCode, resp.Header, b}
	}
	for _, c := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"NotJSON", "POST", "/v1/users", `{"username":`, 400},
		{"TwoObjects", "POST", "/v1/users", `{} {}`, 400},
		{"BadUTF8", "POST", "/v1/users", "{\"username\":\"a\xff\"}", 400},
		{"TooLarge", "POST", "/v1/users", `{"username":"` + strings.Repeat("a", 17<<10) + `"}`, 413},
		{"WrongType", "POST", "/v1/users", `{"username":1}`, 422},
		{"RolesNotList", "PATCH", "/v1/users/x", `{"roles":"admin"}`, 422},
		{"NothingToChange", "PATCH", "/v1/users/nobody", `{}`, 422},
		{"UnknownUser", "PATCH", "/v1/users/nobody", `{"disabled":true}`, 404},
		{"BadUsernameInPath", "GET", "/v1/users/-x", ``, 422},
		{"LoginNotJSON", "POST", "/v1/login", `username=a&password=b`, 400},
		{"RefreshGarbage", "POST", "/v1/refresh", `{"refresh_token":"nope"}`, 401},
		{"LogoutUnknown", "POST", "/v1/logout", `{"refresh_token":"tvr_nope"}`, 401},
		{"Method", "PUT", "/v1/login", `{}`, 405},
		{"Path", "GET", "/v1/nothing", ``, 404},
		{"AdminKeyHasNoPassword", "POST", "/v1/me/password", `{"current_password":"x","new_password":"y"}`, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw(c.method, c.path, c.body).want(t, c.method+" "+c.path, c.want)
		})
	}
	r := s.do(t, "GET", "/v1/users", s.adminKey, nil)
	r.want(t, "list", 200)
	if strings.TrimSpace(string(r.body)) != `{"users":[]}` {
		t.Fatalf("after bad input the users are %s, want none", r.body)
	}
}

// TestNoEcho pastes a password where a role or a field name belongs: the
// error says what is wrong without repeating it.
func TestNoEcho(t *testing.T) {
	s := newServer(t, identity.Options{}, httpapi.Options{})
	secret := "Pa55-" + hex.EncodeToString([]byte("pasted in the wrong place"))
	for _, body := range []map[string]any{
		{"username": "eve", "password": pw, "roles": []string{secret}},
		{"username": "eve", "password": pw, secret: true},
	} {
		r := s.do(t, "POST", "/v1/users", s.adminKey, body)
		r.want(t, "POST /v1/users", 422)
		if strings.Contains(string(r.body), secret) {
			t.Fatalf("the answer repeats the pasted secret: %s", r.body)
		}
	}
}

// TestLogin_Forwarder: the admin interface names each browser's address with
// its forwarder key, so one address's wrong passwords lock out only that
// address; without the key (or with a wrong one) X-Forwarded-For is ignored.
// The audit trail keeps the address's /24, and a username that names no
// person (perhaps a password typed into the wrong field) is not recorded.
func TestLogin_Forwarder(t *testing.T) {
	const key = "forwarder-key-0123456789abcdef0123456789"
	s := newServer(t, identity.Options{MaxFailuresUser: 50, MaxFailuresIP: 3, FailureWindow: time.Minute},
		httpapi.Options{ForwarderKey: key})
	root := "fw-" + strings.ToLower(hex.EncodeToString([]byte(time.Now().Format("150405.000"))))
	s.createUser(t, root, pw, "analyst")
	typo := "Typed-" + hex.EncodeToString([]byte(time.Now().Format("150405.000000"))) + "!"
	login := func(name, password, ip, k string) response {
		return s.do(t, "POST", "/v1/login", "", map[string]string{"username": name, "password": password},
			"X-Forwarded-For", ip, "X-Forwarder-Key", k)
	}
	for range 3 {
		login(typo, "wrong password", "198.51.100.77", key).want(t, "attacker", 401)
	}
	r := login(root, pw, "198.51.100.77", key)
	r.want(t, "the attacker's address, right password", 429)
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	login(root, pw, "203.0.113.5", key).want(t, "another browser through the same UI", 200)
	// A wrong key does not make the header count: every such attempt is
	// the peer's own (127.0.0.1), which still has its tries.
	login(root, pw, "198.51.100.77", "wrong-key").want(t, "wrong key, the peer's own address", 200)

	deadline := time.Now().Add(15 * time.Second)
	for {
		var ok bool
		for _, rec := range auditRows(t, root) {
			b, _ := json.Marshal(rec)
			if bytes.Contains(b, []byte("203.0.113.5")) {
				t.Fatalf("audit record holds the full address: %s", b)
			}
			if rec["action"] == identity.ActionLogin && rec["client_ip"] == "203.0.113.0" {
				ok = true
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sign-in of %s recorded with client_ip 203.0.113.0: %v", root, auditRows(t, root))
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, rec := range auditRows(t, "") {
		if b, _ := json.Marshal(rec); bytes.Contains(b, []byte(typo)) || bytes.Contains(b, []byte(strings.ToLower(typo))) {
			t.Fatalf("audit record holds what was typed as the username: %s", b)
		}
	}
	if strings.Contains(s.log.String(), typo) || strings.Contains(s.log.String(), "198.51.100.77") {
		t.Fatalf("the log holds the typed username or a full address:\n%s", s.log.String())
	}
}
