package tokenauth_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"threatview/collector/tokenauth"
	"threatview/migrations"
	"threatview/platform/testenv"
)

const (
	adminKey    = "tokenauth-admin"
	internalKey = "tokenauth-internal"
)

// tokensBinary is the real tokens service, run as a process (services never
// import each other), built once per test binary.
func tokensBinary(t *testing.T) string {
	t.Helper()
	return testenv.MustBuild(t, "./services/tokens/cmd/tokens")
}

// tokensService is a running tokens process behind a proxy that counts
// introspections.
type tokensService struct {
	direct  string // the process
	proxied string // the counting proxy; clients under test use this
	cmd     *exec.Cmd
	topic   string // where it announces revocations
	lookups atomic.Int64
	warms   atomic.Int64  // warm-up requests (GET /v1/introspect/active)
	gate    chan struct{} // when not nil, introspections and warm-ups wait for it to close
	gateMu  sync.Mutex
}

func startTokens(t *testing.T) *tokensService {
	t.Helper()
	bin := tokensBinary(t)
	dsn := testenv.MustMariaDB(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := migrations.Up(ctx, db, migrations.Tokens); err != nil {
		t.Fatalf("migrate tokens: %v", err)
	}
	db.Close()

	broker := testenv.MustBroker(t)
	topic := "/topic/" + testenv.Name("test.revocations")
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"STOMP_ADDR=" + broker.Addr,
		"STOMP_LOGIN=" + broker.Login,
		"STOMP_PASSCODE=" + broker.Passcode,
		"TOKENS_REVOCATIONS_TOPIC=" + topic,
		"HTTP_ADDR=127.0.0.1:0",
		"TOKENS_DATABASE_DSN=" + dsn,
		"ADMIN_KEY=" + adminKey,
		"INTERNAL_KEY=" + internalKey,
		"LOG_LEVEL=info",
		"HTTP_SHUTDOWN_TIMEOUT=1s",
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &tokensService{cmd: cmd, topic: topic}
	t.Cleanup(s.stop)
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "http server listening" {
				addrc <- rec.Addr
			}
		}
	}()
	select {
	case addr := <-addrc:
		s.direct = "http://" + addr
	case <-time.After(20 * time.Second):
		t.Fatal("tokens service did not report its address")
	}
	target, _ := url.Parse(s.direct)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/introspect" || r.URL.Path == "/v1/introspect/active" {
			if r.URL.Path == "/v1/introspect" {
				s.lookups.Add(1)
			} else {
				s.warms.Add(1)
			}
			s.gateMu.Lock()
			g := s.gate
			s.gateMu.Unlock()
			if g != nil {
				<-g
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	s.proxied = proxy.URL
	return s
}

func (s *tokensService) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func (s *tokensService) admin(t *testing.T, method, path, body string) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, s.direct+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, raw)
	}
	return raw
}

func (s *tokensService) create(t *testing.T, app string) (id, token string) {
	t.Helper()
	var c struct{ ID, Token string }
	if err := json.Unmarshal(s.admin(t, http.MethodPost, "/v1/tokens", `{"app_id":"`+app+`"}`), &c); err != nil {
		t.Fatal(err)
	}
	return c.ID, c.Token
}

func newClient(t *testing.T, s *tokensService, cfg tokenauth.Config) *tokenauth.Client {
	t.Helper()
	cfg.URL = s.proxied
	if cfg.InternalKey == "" {
		cfg.InternalKey = internalKey
	}
	c, err := tokenauth.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheck_CachesAndRevokes(t *testing.T) {
	s := startTokens(t)
	id, token := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: 200 * time.Millisecond, NegativeTTL: 100 * time.Millisecond})
	ctx := context.Background()

	got, err := c.Check(ctx, token)
	if err != nil || got != (tokenauth.Identity{TokenID: id, AppID: "demo-app"}) {
		t.Fatalf("Check() = %+v, %v, want %s of demo-app", got, err, id)
	}
	s.admin(t, http.MethodDelete, "/v1/tokens/"+id, "")
	// The revocation is seen once the positive entry expires.
	testenv.MustPing(t, 10*time.Second, "revocation at the client", func() error {
		_, err := c.Check(ctx, token)
		if errors.Is(err, tokenauth.ErrUnauthorized) {
			return nil
		}
		return fmt.Errorf("Check() = %v, want ErrUnauthorized", err)
	})
	if st := c.Stats(); st.Lookups < 2 || st.LookupErrors != 0 {
		t.Fatalf("stats = %+v, want at least 2 lookups and no errors", st)
	}
}

func TestCheck_OneLookupPerTTL(t *testing.T) {
	s := startTokens(t)
	id, token := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: time.Minute})
	for i := 0; i < 100; i++ {
		got, err := c.Check(context.Background(), token)
		if err != nil || got.TokenID != id {
			t.Fatalf("Check() #%d = %+v, %v", i, got, err)
		}
	}
	if n := s.lookups.Load(); n != 1 {
		t.Fatalf("upstream introspections = %d for 100 checks, want 1", n)
	}
	st := c.Stats()
	if st.Hits != 99 || st.Misses != 1 || st.Lookups != 1 {
		t.Fatalf("stats = %+v, want 99 hits, 1 miss, 1 lookup", st)
	}

	// Unknown and malformed tokens: refused; an unknown one is looked up
	// once per NegativeTTL, a malformed one never.
	unknown := "tvk_" + strings.Repeat("A", 43)
	for i := 0; i < 10; i++ {
		if _, err := c.Check(context.Background(), unknown); !errors.Is(err, tokenauth.ErrUnauthorized) {
			t.Fatalf("Check(unknown) = %v, want ErrUnauthorized", err)
		}
	}
	for _, bad := range []string{"", "tvk_", "Bearer x", token + "x", strings.ToUpper(token)} {
		if _, err := c.Check(context.Background(), bad); !errors.Is(err, tokenauth.ErrUnauthorized) {
			t.Fatalf("Check(%q) = %v, want ErrUnauthorized", bad, err)
		}
	}
	if n := s.lookups.Load(); n != 2 {
		t.Fatalf("upstream introspections = %d, want 2 (one for the unknown token)", n)
	}
}

func TestCheck_SingleFlight(t *testing.T) {
	s := startTokens(t)
	id, token := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: time.Minute})

	gate := make(chan struct{})
	s.gateMu.Lock()
	s.gate = gate
	s.gateMu.Unlock()
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Check(context.Background(), token)
			if err == nil && got.TokenID != id {
				err = fmt.Errorf("identity %+v, want token %s", got, id)
			}
			errs <- err
		}()
	}
	// Hold the one lookup until every check has missed the cache and joined it.
	testenv.MustPing(t, 10*time.Second, "concurrent checks", func() error {
		if m := c.Stats().Misses; m != n {
			return fmt.Errorf("%d misses", m)
		}
		return nil
	})
	time.Sleep(50 * time.Millisecond)
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Check() = %v", err)
		}
	}
	if got := s.lookups.Load(); got != 1 {
		t.Fatalf("upstream introspections = %d for %d concurrent checks, want 1", got, n)
	}
}

func TestCheck_UpstreamDown(t *testing.T) {
	s := startTokens(t)
	id, token := s.create(t, "demo-app")
	_, fresh := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: 200 * time.Millisecond, Timeout: time.Second})
	follow(t, c, s)
	ctx := context.Background()
	if _, err := c.Check(ctx, token); err != nil {
		t.Fatal(err)
	}
	s.stop()
	// Past the positive TTL, with the service down, the cached token works.
	time.Sleep(300 * time.Millisecond)
	for i := 0; i < 5; i++ {
		got, err := c.Check(ctx, token)
		if err != nil || got.TokenID != id {
			t.Fatalf("Check(cached) with the service down = %+v, %v, want %s", got, err, id)
		}
	}
	// A token never seen gets ErrUnavailable, not ErrUnauthorized.
	if _, err := c.Check(ctx, fresh); !errors.Is(err, tokenauth.ErrUnavailable) || errors.Is(err, tokenauth.ErrUnauthorized) {
		t.Fatalf("Check(uncached) with the service down = %v, want ErrUnavailable", err)
	}
	if st := c.Stats(); st.StaleServed == 0 || st.LookupErrors == 0 {
		t.Fatalf("stats = %+v, want stale serves and lookup errors counted", st)
	}
}

func TestCheck_StaleLimit(t *testing.T) {
	s := startTokens(t)
	_, token := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: 100 * time.Millisecond, MaxStale: -1})
	if _, err := c.Check(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	s.stop()
	testenv.MustPing(t, 10*time.Second, "expiry without stale grace", func() error {
		if _, err := c.Check(context.Background(), token); !errors.Is(err, tokenauth.ErrUnavailable) {
			return fmt.Errorf("Check() = %v, want ErrUnavailable", err)
		}
		return nil
	})
}

func TestCheck_WrongInternalKey(t *testing.T) {
	s := startTokens(t)
	_, token := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{InternalKey: "not-the-key"})
	// The collector's misconfiguration is not the app's fault: 503, not 401.
	if _, err := c.Check(context.Background(), token); !errors.Is(err, tokenauth.ErrUnavailable) {
		t.Fatalf("Check() with a wrong internal key = %v, want ErrUnavailable", err)
	}
}

func TestCheck_CallerContext(t *testing.T) {
	s := startTokens(t)
	id, token := s.create(t, "demo-app")
	c := newClient(t, s, tokenauth.Config{PositiveTTL: time.Minute})
	gate := make(chan struct{})
	s.gateMu.Lock()
	s.gate = gate
	s.gateMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, token); !errors.Is(err, context.Canceled) {
		t.Fatalf("Check(cancelled ctx) = %v, want context.Canceled", err)
	}
	// The abandoned caller did not fail the lookup for others.
	close(gate)
	got, err := c.Check(context.Background(), token)
	if err != nil || got.TokenID != id {
		t.Fatalf("Check() after an abandoned one = %+v, %v", got, err)
	}
}

func TestNew(t *testing.T) {
	if _, err := tokenauth.New(tokenauth.Config{InternalKey: "k"}, nil); err == nil {
		t.Fatal("New without URL = nil error")
	}
	if _, err := tokenauth.New(tokenauth.Config{URL: "http://x"}, nil); err == nil {
		t.Fatal("New without InternalKey = nil error")
	}
}
