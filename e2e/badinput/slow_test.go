package badinput

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
)

// slowDeadline bounds each slow-client test. It is a test deadline, not a
// speed assertion: the collector's configured timeouts (HTTP_READ_HEADER_TIMEOUT
// 5s, HTTP_READ_TIMEOUT 10s by default) must end the connection well before.
const slowDeadline = 90 * time.Second

// trickle writes data one byte at a time every gap until it is written, the
// connection fails, or stop is closed.
func trickle(c net.Conn, data string, gap time.Duration, stop <-chan struct{}) {
	for i := 0; i < len(data); i++ {
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
		if _, err := c.Write([]byte{data[i]}); err != nil {
			return
		}
	}
}

// readUntilClosed reads c until the server closes it, and returns what it
// read. Hitting slowDeadline fails the test: the server kept a slow client.
func readUntilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(slowDeadline)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept a slow client's connection open for %s (read so far %q)", slowDeadline, got)
		}
		// io.EOF or a reset: the server closed the connection.
		if !errors.Is(err, io.EOF) {
			t.Logf("connection ended with %v", err)
		}
		return got
	}
}

func dial(t *testing.T, base string) (net.Conn, string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", u.Host, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, u.Host
}

// checkAnswer checks that a response, if the server sent one before
// closing, is a 4xx (408 from net/http, or 400 from the handler whose body
// read timed out).
func checkAnswer(t *testing.T, raw []byte) {
	t.Helper()
	if len(raw) == 0 {
		return // closed without an answer: what net/http does on a header timeout
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(raw))), nil)
	if err != nil {
		t.Errorf("server sent %q, not an HTTP response: %v", raw, err)
		return
	}
	if resp.StatusCode < 400 || resp.StatusCode > 499 {
		t.Errorf("slow client got status %d, want a 4xx or a closed connection", resp.StatusCode)
	}
}

// TestSlowClient checks that a client sending its headers or its body one
// byte at a time is cut off by the server's timeouts and that the
// collector stays healthy. Several slow clients run at once.
func TestSlowClient(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "e2e-slow")
	t.Run("Headers", func(t *testing.T) {
		t.Parallel()
		c, host := dial(t, env.CollectorURL)
		stop := make(chan struct{})
		defer close(stop)
		head := "POST /v1/events HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + app.Token +
			"\r\nContent-Type: application/json\r\nX-Slow: " + strings.Repeat("s", 4096) + "\r\n\r\n"
		go trickle(c, head, 500*time.Millisecond, stop)
		checkAnswer(t, readUntilClosed(t, c))
	})
	t.Run("Body", func(t *testing.T) {
		t.Parallel()
		c, host := dial(t, env.CollectorURL)
		body := string(event(app.ID, map[string]string{"attributes": `{"pad":"` + strings.Repeat("b", 2000) + `"}`}))
		head := "POST /v1/events HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + app.Token +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		if _, err := c.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go trickle(c, body, 500*time.Millisecond, stop)
		checkAnswer(t, readUntilClosed(t, c))
	})
	t.Run("Idle", func(t *testing.T) {
		t.Parallel()
		// Connects and sends nothing at all.
		c, _ := dial(t, env.CollectorURL)
		checkAnswer(t, readUntilClosed(t, c))
	})
	t.Run("TokensHeaders", func(t *testing.T) {
		t.Parallel()
		c, host := dial(t, env.TokensURL)
		stop := make(chan struct{})
		defer close(stop)
		go trickle(c, "GET /v1/tokens HTTP/1.1\r\nHost: "+host+"\r\nX-Slow: "+strings.Repeat("s", 4096)+"\r\n\r\n", 500*time.Millisecond, stop)
		checkAnswer(t, readUntilClosed(t, c))
	})
	if os.Getenv("THREATVIEW_E2E_SKIP_HEALTH") == "" {
		t.Cleanup(func() { e2etest.Healthy(t, env) })
	}
}
