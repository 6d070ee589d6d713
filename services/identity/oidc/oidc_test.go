package oidc_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/example/server/storage"

	"threatview/identity"
	"threatview/identity/httpapi"
	"threatview/identity/mariadb"
	"threatview/identity/oidc"
	"threatview/migrations"
	"threatview/platform/auditclient"
	"threatview/platform/httpserver"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// person is one of the identity provider's users.
type person struct {
	username string
	groups   []string
}

// peopleMu guards people: tests rename people and change their groups at
// the provider between sign-ins.
var peopleMu sync.RWMutex

// setPerson adds or changes a person at the provider.
func setPerson(id string, p person) {
	peopleMu.Lock()
	defer peopleMu.Unlock()
	people[id] = p
}

func personByID(id string) (person, bool) {
	peopleMu.RLock()
	defer peopleMu.RUnlock()
	p, ok := people[id]
	return p, ok
}

// people are the identity provider's users and their groups.
var people = map[string]person{
	"u-olga": {"olga", []string{"tv-analysts", "tv-auditors", "staff"}},
	"u-adam": {"Adam", []string{"tv-admins"}},
	"u-nina": {"nina", []string{"marketing"}},
	"u-lou":  {"lou", []string{"tv-admins"}},
}

// userStore serves people to zitadel's example storage.
type userStore struct{}

func (userStore) GetUserByID(id string) *storage.User {
	p, ok := personByID(id)
	if !ok {
		return nil
	}
	return &storage.User{ID: id, Username: p.username, Password: "idp-password", Email: p.username + "@example.com",
		EmailVerified: true, PreferredLanguage: language.English}
}

func (s userStore) GetUserByUsername(name string) *storage.User {
	peopleMu.RLock()
	found := ""
	for id, p := range people {
		if p.username == name {
			found = id
		}
	}
	peopleMu.RUnlock()
	if found == "" {
		return nil
	}
	return s.GetUserByID(found)
}

func (userStore) ExampleClientID() string { return "service" }

// groupsStorage is zitadel's example storage that also puts the person's
// groups and profile claims into the ID token, as a company's identity
// provider configured for Threat View does.
type groupsStorage struct {
	*storage.Storage
}

func (s groupsStorage) SetUserinfoFromRequest(ctx context.Context, info *zoidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	p, _ := personByID(req.GetSubject())
	info.AppendClaims("groups", p.groups)
	return nil
}

// SetUserinfoFromToken serves the groups at the userinfo endpoint too.
func (s groupsStorage) SetUserinfoFromToken(ctx context.Context, info *zoidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	p, _ := personByID(subject)
	info.AppendClaims("groups", p.groups)
	return nil
}

func (s groupsStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil || id != "threatview" {
		return c, err
	}
	return assertingClient{c}, nil
}

// assertingClient puts the userinfo claims (preferred_username, groups) in
// the ID token.
type assertingClient struct{ op.Client }

func (assertingClient) IDTokenUserinfoClaimsAssertion() bool { return true }

// provider starts a real OpenID provider (zitadel's op package) whose login
// page signs in whoever *who names, as if the person typed their password.
func provider(t *testing.T, redirectURL string, who *string) string {
	t.Helper()
	return providerAt(t, "127.0.0.1", redirectURL, who, false)
}

// providerAt is provider listening on host (another loopback address is
// another site to a browser). Its /elsewhere?to=URL page links to URL, as a
// page of another site would. With form, its login page is a form the
// person submits, as a real provider's is (so the redirect back to the
// client is a navigation the provider's site started).
func providerAt(t *testing.T, host, redirectURL string, who *string, form bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	st := storage.NewStorageWithClients(userStore{}, map[string]*storage.Client{
		"threatview": storage.WebClient("threatview", "client-secret", redirectURL),
		// A client whose ID tokens carry no profile or groups: those come
		// from the userinfo endpoint.
		"threatview-plain": storage.WebClient("threatview-plain", "plain-secret", redirectURL),
	})
	gs := groupsStorage{st}
	p, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte("test")), CodeMethodS256: true, SupportedUILocales: []language.Tag{language.English}},
		gs, op.StaticIssuer(issuer), op.WithAllowInsecure(), op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	interceptor := op.NewIssuerInterceptor(p.IssuerFromRequest)
	mux.Handle("/login/username", interceptor.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("authRequestID")
		if form && r.Method != http.MethodPost {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>provider</title><form method="post" action="/login/username?authRequestID=%s"><button id="signin">Sign in</button></form>`, url.QueryEscape(id))
			return
		}
		if err := st.CheckUsernamePassword(*who, "idp-password", id); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, op.AuthCallbackURL(p)(r.Context(), id), http.StatusFound)
	}))
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>elsewhere</title><a id="go" href="%s">to Threat View</a>`, html.EscapeString(r.URL.Query().Get("to")))
	})
	mux.Handle("/", p)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}

func TestSignIn(t *testing.T) {
	dsn := testenv.MustMariaDB(t)
	db, err := mariadb.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Up(context.Background(), db, migrations.Identity); err != nil {
		t.Fatal(err)
	}
	store := mariadb.New(db)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	var who string
	issuer := provider(t, base+"/v1/oidc/callback", &who)

	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	keys, _ := identity.ParseKeyring(hex.EncodeToString(seed))
	hasher, _ := identity.NewHasher(identity.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}, 2)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	audit := auditclient.New(testenv.MustEnv(t, "THREATVIEW_AUDIT_URL"), testenv.MustEnv(t, "INTERNAL_KEY"), auditclient.Options{Timeout: 5 * time.Second, Unavailable: identity.ErrAuditUnavailable})
	rec := &recorder{next: audit}
	svc := identity.NewService(store, hasher, keys, rec, identity.Options{}, log)
	roleMap, err := identity.ParseRoleMap("tv-admins=admin, tv-analysts=analyst, tv-auditors=auditor")
	if err != nil {
		t.Fatal(err)
	}
	client := oidc.New(oidc.Config{Issuer: issuer, ClientID: "threatview", ClientSecret: "client-secret",
		RedirectURL: base + "/v1/oidc/callback", Scopes: []string{"openid", "profile", "email"}, RoleMap: roleMap}, store, nil, log)
	h := httpapi.New(svc, httpapi.Options{AdminKey: "oidc-test-admin", OIDC: client}, httpserver.NewRegistry(), nil, log)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	// browser follows redirects with a cookie jar, noting the URLs it saw.
	browser := func() (*http.Client, *[]string) {
		jar, _ := cookiejar.New(nil)
		var mu sync.Mutex
		seen := &[]string{}
		return &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			mu.Lock()
			*seen = append(*seen, req.URL.String())
			mu.Unlock()
			return nil
		}}, seen
	}
	signIn := func(t *testing.T, person string) (int, []byte, []string) {
		t.Helper()
		who = person
		c, seen := browser()
		resp, err := c.Get(base + "/v1/oidc/login")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, *seen
	}

	t.Run("GroupsToRoles", func(t *testing.T) {
		for _, c := range []struct {
			name, username string
			roles          []string
		}{
			{"olga", "olga", []string{"analyst", "auditor"}},
			{"Adam", "adam", []string{"admin"}},
		} {
			status, body, seen := signIn(t, c.name)
			if status != 200 {
				t.Fatalf("sign-in of %s = %d %s", c.name, status, body)
			}
			if len(seen) == 0 || !strings.Contains(seen[0], "code_challenge_method=S256") || !strings.Contains(seen[0], "code_challenge=") {
				t.Fatalf("authorization request %v does not use PKCE S256", seen)
			}
			var sess struct {
				AccessToken string `json:"access_token"`
				User        struct {
					Username string   `json:"username"`
					Roles    []string `json:"roles"`
				} `json:"user"`
			}
			if err := json.Unmarshal(body, &sess); err != nil {
				t.Fatal(err)
			}
			if sess.User.Username != c.username || !slices.Equal(sess.User.Roles, c.roles) {
				t.Fatalf("user = %+v, want %s %v", sess.User, c.username, c.roles)
			}
			// The access token works like a password sign-in's.
			req, _ := http.NewRequest("GET", base+"/v1/me", nil)
			req.Header.Set("Authorization", "Bearer "+sess.AccessToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			me, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(me), `"source":"oidc"`) {
				t.Fatalf("GET /v1/me = %d %s", resp.StatusCode, me)
			}
		}
	})
	t.Run("GroupsFromUserinfo", func(t *testing.T) {
		plain := oidc.New(oidc.Config{Issuer: issuer, ClientID: "threatview-plain", ClientSecret: "plain-secret",
			RedirectURL: base + "/v1/oidc/callback", RoleMap: roleMap}, store, nil, log)
		authURL, state, err := plain.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		who = "olga"
		c, _ := browser()
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if req.URL.Path == "/v1/oidc/callback" {
				return http.ErrUseLastResponse
			}
			return nil
		}
		resp, err := c.Get(authURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cb, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || cb.Query().Get("state") != state || cb.Query().Get("code") == "" {
			t.Fatalf("redirect to %q, want the callback with the state and a code", resp.Header.Get("Location"))
		}
		p, err := plain.Finish(context.Background(), state, cb.Query().Get("code"))
		if err != nil || p.Username != "olga" || p.Subject != "u-olga" || p.Issuer != issuer || !slices.Equal(p.Roles, []string{"analyst", "auditor"}) {
			t.Fatalf("Finish = %+v %v, want olga (u-olga at %s) [analyst auditor]", p, err, issuer)
		}
	})
	t.Run("NoRole", func(t *testing.T) {
		status, body, _ := signIn(t, "nina")
		if status != 403 {
			t.Fatalf("sign-in of a person without a mapped group = %d %s, want 403", status, body)
		}
		if _, err := store.GetUser(context.Background(), "nina"); err == nil {
			t.Fatal("a person without a role was stored")
		}
	})
	t.Run("NoTakeoverOfLocalAccount", func(t *testing.T) {
		if _, err := svc.CreateUser(context.Background(), identity.NewUser{Username: "lou", Password: "a local password", Roles: []string{"analyst"}}, identity.Meta{Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		status, body, _ := signIn(t, "lou")
		if status != 403 {
			t.Fatalf("OIDC sign-in as a local person = %d %s, want 403", status, body)
		}
	})
	// sessionOf decodes a sign-in's answer.
	type sessionAnswer struct {
		RefreshToken     string    `json:"refresh_token"`
		RefreshExpiresAt time.Time `json:"refresh_expires_at"`
		User             struct {
			Username string   `json:"username"`
			Roles    []string `json:"roles"`
		} `json:"user"`
	}
	sessionOf := func(t *testing.T, body []byte) sessionAnswer {
		t.Helper()
		var s sessionAnswer
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatalf("sign-in answer %s: %v", body, err)
		}
		return s
	}
	refresh := func(t *testing.T, token string) (int, sessionAnswer) {
		t.Helper()
		resp, err := http.Post(base+"/v1/refresh", "application/json", strings.NewReader(`{"refresh_token":"`+token+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return resp.StatusCode, sessionAnswer{}
		}
		return 200, sessionOf(t, b)
	}
	t.Run("KeyedBySubject", func(t *testing.T) {
		// The provider renames a person: still the same Threat View person.
		setPerson("u-rita", person{"rita", []string{"tv-analysts"}})
		status, body, _ := signIn(t, "rita")
		if status != 200 {
			t.Fatalf("sign-in of rita = %d %s", status, body)
		}
		setPerson("u-rita", person{"rita-new", []string{"tv-analysts"}})
		status, body, _ = signIn(t, "rita-new")
		if s := sessionOf(t, body); status != 200 || s.User.Username != "rita" {
			t.Fatalf("sign-in after the rename = %d %s, want 200 as rita", status, body)
		}
		// Someone else now called rita at the provider (an admin there)
		// does not become rita here.
		setPerson("u-imposter", person{"rita", []string{"tv-admins"}})
		status, body, _ = signIn(t, "rita")
		if status != 403 {
			t.Fatalf("another subject with rita's username = %d %s, want 403", status, body)
		}
		if u, err := store.GetUser(context.Background(), "rita"); err != nil || !slices.Equal(u.Roles, []string{"analyst"}) {
			t.Fatalf("rita = %+v %v, want her analyst role unchanged", u, err)
		}
	})
	t.Run("NoRoleEndsSessions", func(t *testing.T) {
		setPerson("u-ron", person{"ron", []string{"tv-admins"}})
		status, body, _ := signIn(t, "ron")
		if status != 200 {
			t.Fatalf("sign-in of ron = %d %s", status, body)
		}
		first := sessionOf(t, body)
		// Removed from every Threat View group at the provider: the next
		// sign-in is refused, and it ends the sessions ron already has.
		setPerson("u-ron", person{"ron", []string{"marketing"}})
		if status, body, _ := signIn(t, "ron"); status != 403 {
			t.Fatalf("sign-in without a role = %d %s, want 403", status, body)
		}
		if status, _ := refresh(t, first.RefreshToken); status != 401 {
			t.Fatalf("refresh of ron's earlier session = %d, want 401", status)
		}
		if u, err := store.GetUser(context.Background(), "ron"); err != nil || len(u.Roles) != 0 {
			t.Fatalf("ron = %+v %v, want no roles", u, err)
		}
	})
	t.Run("SessionDoesNotSlide", func(t *testing.T) {
		// A provider sign-in lasts the OIDC session lifetime (1 h by
		// default), however often it is renewed: a person removed at the
		// provider must come back through it within that time.
		setPerson("u-sam", person{"sam", []string{"tv-analysts"}})
		status, body, _ := signIn(t, "sam")
		if status != 200 {
			t.Fatalf("sign-in of sam = %d %s", status, body)
		}
		s := sessionOf(t, body)
		if d := time.Until(s.RefreshExpiresAt); d > time.Hour+time.Minute || d < 58*time.Minute {
			t.Fatalf("refresh_expires_at in %s, want 1 h", d)
		}
		status, next := refresh(t, s.RefreshToken)
		if status != 200 || !next.RefreshExpiresAt.Equal(s.RefreshExpiresAt) {
			t.Fatalf("refresh = %d, expires %s; want 200 and the sign-in's %s", status, next.RefreshExpiresAt, s.RefreshExpiresAt)
		}
	})
	t.Run("LastOwnerKeepsOwnerRole", func(t *testing.T) {
		// The provider takes the last active Account Owner out of the
		// owners' group: signing in must not leave Threat View without an
		// owner. The person keeps role admin (beside the provider's
		// roles), signs in, and the trail says why.
		setPerson("u-ola", person{"ola", []string{"tv-admins"}})
		if status, body, _ := signIn(t, "ola"); status != 200 {
			t.Fatalf("sign-in of ola = %d %s", status, body)
		}
		users, err := store.ListUsers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if u.Username != "ola" && u.ActiveOwner() {
				if _, err := svc.UpdateUser(context.Background(), u.Username, identity.UserChange{Disabled: ptr(true)}, identity.Meta{Actor: "test"}); err != nil {
					t.Fatalf("lock owner %s: %v", u.Username, err)
				}
			}
		}
		for _, c := range []struct {
			groups []string
			roles  []string
		}{
			{[]string{"tv-analysts"}, []string{"admin", "analyst"}},
			{[]string{"marketing"}, []string{"admin"}}, // no group of Threat View left
		} {
			setPerson("u-ola", person{"ola", c.groups})
			status, body, _ := signIn(t, "ola")
			if s := sessionOf(t, body); status != 200 || !slices.Equal(s.User.Roles, c.roles) {
				t.Fatalf("last owner signs in with groups %v = %d %s, want 200 with roles %v", c.groups, status, body, c.roles)
			}
			u, err := store.GetUser(context.Background(), "ola")
			if err != nil || !u.ActiveOwner() {
				t.Fatalf("ola after signing in with groups %v = %+v %v, want still an active owner", c.groups, u, err)
			}
		}
		kept := rec.find(identity.ActionOwnerKept, "user:ola")
		if len(kept) != 2 {
			t.Fatalf("audit records %s of ola = %d, want 2", identity.ActionOwnerKept, len(kept))
		}
		// With another owner beside her, the provider's groups apply again.
		if _, err := svc.UpdateUser(context.Background(), "adam", identity.UserChange{Disabled: ptr(false), Roles: &[]string{"admin"}}, identity.Meta{Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		setPerson("u-ola", person{"ola", []string{"tv-analysts"}})
		if status, body, _ := signIn(t, "ola"); status != 200 || !slices.Equal(sessionOf(t, body).User.Roles, []string{"analyst"}) {
			t.Fatalf("ola beside another owner = %d %s, want 200 as analyst only", status, body)
		}
	})
	t.Run("StateFromAnotherBrowser", func(t *testing.T) {
		// An attacker's callback URL replayed in a victim's browser (login
		// CSRF): the state cookie is missing, so the sign-in is refused.
		who = "olga"
		c, _ := browser()
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if req.URL.Path == "/v1/oidc/callback" {
				return http.ErrUseLastResponse
			}
			return nil
		}
		resp, err := c.Get(base + "/v1/oidc/login")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cb := resp.Header.Get("Location")
		if !strings.Contains(cb, "/v1/oidc/callback?") {
			t.Fatalf("last redirect = %q, want the callback", cb)
		}
		victim, _ := browser()
		resp, err = victim.Get(cb)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("callback in another browser = %d, want 401", resp.StatusCode)
		}
		// The rightful browser can still use it once, and only once.
		u, _ := url.Parse(cb)
		for i, want := range []int{200, 401} {
			resp, err = c.Get(u.String())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want && i == 0 {
				t.Fatalf("callback = %d, want %d", resp.StatusCode, want)
			}
			if i == 1 && resp.StatusCode == 200 {
				t.Fatal("a callback was accepted twice")
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

// recorder passes audit records on and keeps them, so a test can look for
// one without reading the trail back.
type recorder struct {
	next identity.Auditor
	mu   sync.Mutex
	recs []wire.AuditRecord
}

func (r *recorder) Audit(ctx context.Context, rec wire.AuditRecord) error {
	if err := r.next.Audit(ctx, rec); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// find returns the records of action about resource.
func (r *recorder) find(action, resource string) []wire.AuditRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []wire.AuditRecord
	for _, rec := range r.recs {
		if rec.Action == action && rec.Resource == resource {
			out = append(out, rec)
		}
	}
	return out
}
