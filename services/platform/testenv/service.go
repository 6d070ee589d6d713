package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Service is a service's binary that a test started.
type Service struct {
	URL string      // http://ADDR
	Log *SyncBuffer // its standard output and error
}

// FreeAddr returns a loopback address host:port with a port free at the
// time of the call, for a server the test configures before it starts.
func FreeAddr(tb testing.TB, host string) string {
	tb.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// StartService builds the service command pkg from the tree (MustBuild)
// and runs it with env on addr (HTTP_ADDR; a free 127.0.0.1 port when addr
// is "") until the test ends. It returns once /healthz answers 200, and
// fails the test with the service's output when that takes over 30 s.
// env holds NAME=value pairs; PATH is passed on.
func StartService(tb testing.TB, pkg, addr string, env ...string) *Service {
	tb.Helper()
	if addr == "" {
		addr = FreeAddr(tb, "127.0.0.1")
	}
	s := &Service{URL: "http://" + addr, Log: &SyncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, MustBuild(tb, pkg))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HTTP_ADDR=" + addr}, env...)
	cmd.Stdout, cmd.Stderr = s.Log, s.Log
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("start %s: %v", pkg, err)
	}
	tb.Cleanup(func() { cancel(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(s.URL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not start:\n%s", pkg, s.Log.String())
		}
	}
}

// StartAdminInterface runs the admin interface's binary (StartService) on
// addr ("" for a free port) with identityURL as its identity, tokens and
// audit logger services, a random session key, the local broker's
// STOMP_ADDR, and identity as its one status target. env adds or overrides
// settings (a later NAME=value wins).
func StartAdminInterface(tb testing.TB, addr, identityURL string, env ...string) *Service {
	tb.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return StartService(tb, "./services/admininterface/cmd/admininterface", addr, append([]string{
		"IDENTITY_SERVICE_URL=" + identityURL, "TOKENS_SERVICE_URL=" + identityURL, "AUDITLOGGER_SERVICE_URL=" + identityURL,
		"INTERNAL_KEY=ui-test-internal-key", "ADMINUI_SESSION_KEY=" + hex.EncodeToString(key),
		"ADMINUI_COLLECTOR_PUBLIC_URL=http://127.0.0.1:8080", "ADMINUI_STATUS_TARGETS=identity=" + identityURL,
		"STOMP_ADDR=" + os.Getenv("STOMP_ADDR"),
	}, env...)...)
}
