// Package rsyslogtest starts a private rsyslogd (Debian's rsyslog and
// rsyslog-openssl, installed by scripts/stack.sh install) listening on a
// loopback port with TLS (RFC 5425) under a CA made for the test, writing
// every message it receives to a file.
package rsyslogtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"threatview/platform/testenv"
)

// Server is a running rsyslogd.
type Server struct {
	Addr  string // 127.0.0.1:port
	CAPEM string // the CA its certificate chains to
	File  string // where it writes each message, one a line
	cmd   *exec.Cmd
}

// Start starts rsyslogd with TLS on (tls true) or plain TCP, stopped at
// cleanup. Without rsyslogd it fails under make test and skips otherwise.
func Start(tb testing.TB, tls bool) *Server {
	tb.Helper()
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		if testenv.Required() {
			tb.Fatalf("rsyslogd not found (scripts/stack.sh install installs rsyslog and rsyslog-openssl): %v", err)
		}
		tb.Skip("rsyslogd not installed")
	}
	dir := tb.TempDir()
	s := &Server{File: filepath.Join(dir, "received.log")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.Addr = l.Addr().String()
	_, port, _ := net.SplitHostPort(s.Addr)
	l.Close()
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o700); err != nil {
		tb.Fatal(err)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "global(workDirectory=%q maxMessageSize=\"64k\")\n", filepath.Join(dir, "work"))
	if tls {
		ca, cert, key := Certs(tb)
		s.CAPEM = string(ca)
		for name, b := range map[string][]byte{"ca.pem": ca, "cert.pem": cert, "key.pem": key} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
		fmt.Fprintf(&conf, "global(DefaultNetstreamDriver=\"ossl\" DefaultNetstreamDriverCAFile=%q DefaultNetstreamDriverCertFile=%q DefaultNetstreamDriverKeyFile=%q)\n",
			filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
		conf.WriteString("module(load=\"imtcp\" StreamDriver.Name=\"ossl\" StreamDriver.Mode=\"1\" StreamDriver.AuthMode=\"anon\")\n")
	} else {
		conf.WriteString("module(load=\"imtcp\")\n")
	}
	fmt.Fprintf(&conf, "input(type=\"imtcp\" address=\"127.0.0.1\" port=%q)\n", port)
	conf.WriteString("template(name=\"raw\" type=\"string\" string=\"%rawmsg%\\n\")\n")
	fmt.Fprintf(&conf, "action(type=\"omfile\" file=%q template=\"raw\")\n", s.File)
	cfgPath := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(cfgPath, []byte(conf.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	s.cmd = exec.Command(bin, "-n", "-f", cfgPath, "-i", filepath.Join(dir, "rsyslogd.pid"))
	Run(tb, s.cmd, "rsyslogd", s.Addr)
	return s
}

// Run starts cmd (a test's private server) in a process group of its own,
// stops the group at cleanup (SIGTERM, SIGKILL after 10 s), and waits until
// addr takes connections; it fails the test with the server's output when
// the server exits first.
func Run(tb testing.TB, cmd *exec.Cmd, name, addr string) {
	tb.Helper()
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	testenv.MustPing(tb, 15*time.Second, name+" on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			if cmd.ProcessState != nil {
				tb.Fatalf("%s exited: %s", name, out)
			}
			return err
		}
		return c.Close()
	})
}

var eventID = regexp.MustCompile(`event_id="([0-9a-f-]{36})"`)

// Received returns how many times each event_id arrived, and the lines.
func (s *Server) Received(tb testing.TB) (map[string]int, []string) {
	tb.Helper()
	b, err := os.ReadFile(s.File)
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	ids := map[string]int{}
	var lines []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		lines = append(lines, string(line))
		if m := eventID.FindSubmatch(line); m != nil {
			ids[string(m[1])]++
		}
	}
	return ids, lines
}

// Certs makes a CA and a server certificate for 127.0.0.1 and localhost
// (PEM), for the tests' private servers (rsyslogd here, Exim in eximtest).
func Certs(tb testing.TB) (caPEM, certPEM, keyPEM []byte) {
	tb.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "threatview test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}
