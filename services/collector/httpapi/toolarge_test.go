package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A client sending more than the request limit gets its 413 and the JSON
// error over a real TCP connection, not a reset. The client here is the
// simplest kind (write the whole request, then read the answer), which a
// server that closes on unread body data breaks with EPIPE or ECONNRESET:
// and a client that sees a network error retries the same body forever.
func TestPostEvents_TooLargeReachesClient(t *testing.T) {
	f := newFixture(t, nil)
	srv := httptest.NewUnstartedServer(f.h)
	srv.Config.ReadTimeout = 30 * time.Second
	srv.Config.WriteTimeout = 30 * time.Second
	srv.Start()
	defer srv.Close()

	// 60 events of 20 KB: 1.2 MB, over the 1 MiB limit.
	pad := strings.Repeat("x", 20_000)
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	for i := 0; i < 60; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"app.startup","app":{"id":"app1"},"attributes":{"pad":%q}}`, pad)
	}
	b.WriteString(`]}`)
	body := b.Bytes()

	chunk := func(p []byte) []byte {
		var c bytes.Buffer
		for len(p) > 0 {
			n := min(len(p), 32<<10)
			fmt.Fprintf(&c, "%x\r\n%s\r\n", n, p[:n])
			p = p[n:]
		}
		c.WriteString("0\r\n\r\n")
		return c.Bytes()
	}
	for _, tc := range []struct {
		name  string
		head  string
		bytes []byte
	}{
		{"ContentLength", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body},
		{"Chunked", "Transfer-Encoding: chunked\r\n", chunk(body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 5; i++ {
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				// A small send buffer stands in for a real network path:
				// the body is still in flight when the server answers.
				_ = c.(*net.TCPConn).SetWriteBuffer(16 << 10)
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				head := "POST /v1/events HTTP/1.1\r\nHost: collector\r\nAuthorization: Bearer " + goodToken +
					"\r\nContent-Type: application/json\r\n" + tc.head + "\r\n"
				if _, err := c.Write(append([]byte(head), tc.bytes...)); err != nil {
					c.Close()
					t.Fatalf("attempt %d: writing a %d-byte body = %v, want the server to take it and answer 413", i, len(body), err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					c.Close()
					t.Fatalf("attempt %d: read answer = %v, want 413", i, err)
				}
				raw, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				c.Close()
				if err != nil {
					t.Fatalf("attempt %d: read 413 body = %v", i, err)
				}
				if resp.StatusCode != http.StatusRequestEntityTooLarge {
					t.Fatalf("attempt %d: status = %d, want 413 (%s)", i, resp.StatusCode, raw)
				}
				var e struct {
					Error struct{ Code, Message string } `json:"error"`
				}
				if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code != "too_large" {
					t.Fatalf("attempt %d: 413 body = %q, want a JSON error with code too_large", i, raw)
				}
			}
		})
	}
}
