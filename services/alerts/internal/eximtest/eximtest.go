// Package eximtest starts a private Exim (Debian's exim4-daemon-light,
// installed by scripts/stack.sh install), a real mail server, on a loopback
// port with its own configuration, spool and a certificate under a CA made
// for the test, so the alerts service's email is tested against the
// STARTTLS of a mail server it will meet in production rather than of a
// library fake. Every message it accepts is appended to one mbox file.
package eximtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"threatview/alerts/rsyslogtest"
	"threatview/platform/testenv"
)

// Server is a running Exim daemon.
type Server struct {
	Addr  string // 127.0.0.1:port
	CAPEM string // the CA its certificate chains to
	mbox  string
	cmd   *exec.Cmd
}

// Modes of Start.
const (
	StartTLS = "starttls" // STARTTLS offered
	Implicit = "tls"      // TLS from the first byte (tls_on_connect_ports)
	Plain    = "none"     // no TLS at all
)

// Start starts Exim in mode, stopped at cleanup. Without exim4 it fails
// under make test and skips otherwise.
func Start(tb testing.TB, mode string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("exim4")
	if err != nil {
		if testenv.Required() {
			tb.Fatalf("exim4 not found (scripts/stack.sh install installs exim4-daemon-light): %v", err)
		}
		tb.Skip("exim4 not installed")
	}
	// Exim gives up root for a configuration named with -C and runs as its
	// own user, which must reach every path below: not t.TempDir (0700).
	dir, err := os.MkdirTemp("", "eximtest-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"", "spool", "log", "mail"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, d), map[bool]os.FileMode{true: 0o755, false: 0o777}[d == ""]); err != nil {
			tb.Fatal(err)
		}
	}
	ca, cert, key := rsyslogtest.Certs(tb)
	for name, b := range map[string][]byte{"cert.pem": cert, "key.pem": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Addr: l.Addr().String(), CAPEM: string(ca), mbox: filepath.Join(dir, "mail", "received")}
	_, port, _ := net.SplitHostPort(s.Addr)
	l.Close()
	advertise, onConnect := "", ""
	switch mode {
	case StartTLS:
		advertise = "*"
	case Implicit:
		onConnect = "tls_on_connect_ports = " + port
	}
	conf := fmt.Sprintf(`primary_hostname = localhost
spool_directory = %[1]s/spool
log_file_path = %[1]s/log/%%slog
pid_file_path = %[1]s/exim.pid
tls_certificate = %[1]s/cert.pem
tls_privatekey = %[1]s/key.pem
tls_advertise_hosts = %[2]s
daemon_smtp_ports = %[3]s
local_interfaces = 127.0.0.1
%[5]s
acl_smtp_rcpt = acl_rcpt
begin acl
acl_rcpt:
  accept
begin routers
all:
  driver = accept
  transport = mbox
begin transports
mbox:
  driver = appendfile
  file = %[4]s
  user = Debian-exim
  envelope_to_add
  return_path_add
`, dir, advertise, port, s.mbox, onConnect)
	cfgPath := filepath.Join(dir, "exim.conf")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	s.cmd = exec.Command(bin, "-C", cfgPath, "-bdf", "-oX", port)
	// The group: the daemon and the delivery processes it forks.
	rsyslogtest.Run(tb, s.cmd, "exim4", s.Addr)
	return s
}

// Messages returns the messages delivered so far, each as Exim wrote it
// (its Received header says whether the session was TLS), waiting up to
// wait for at least want of them.
func (s *Server) Messages(tb testing.TB, want int, wait time.Duration) []string {
	tb.Helper()
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(s.mbox)
		if err != nil && !os.IsNotExist(err) {
			tb.Fatal(err)
		}
		// Each message in an mbox ends with an empty line; a read in the
		// middle of an append leaves the last one out.
		if i := strings.LastIndex(string(b), "\n\n"); i >= 0 {
			b = b[:i+2]
		} else {
			b = nil
		}
		var msgs []string
		for _, m := range strings.Split(string(b), "\nFrom ") {
			if strings.TrimSpace(m) != "" {
				msgs = append(msgs, m)
			}
		}
		if len(msgs) >= want || time.Now().After(deadline) {
			return msgs
		}
		time.Sleep(50 * time.Millisecond)
	}
}
