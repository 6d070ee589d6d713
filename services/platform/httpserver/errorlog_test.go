package httpserver_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"threatview/platform/httpserver"
)

func TestScrubAddrs(t *testing.T) {
	for in, want := range map[string]string{
		"http: TLS handshake error from 203.0.113.77:51234: EOF":                "http: TLS handshake error from 203.0.113.0:51234: EOF",
		"http: panic serving [2001:db8:77:4242::77]:443: boom":                  "http: panic serving [2001:db8:77::]:443: boom",
		"http2: error reading preface from client [::ffff:198.51.100.9]:7: EOF": "http2: error reading preface from client [::ffff:198.51.100.0]:7: EOF",
		"peer fe80::1%eth0 and 2001:db8::5 went away":                           "peer fe80:: and 2001:db8:: went away",
		"no address at 12:34:56.789, version 1.2.3":                             "no address at 12:34:56.789, version 1.2.3",
	} {
		if got := httpserver.ScrubAddrs(in); got != want {
			t.Errorf("ScrubAddrs(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

// A handler's panic reaches net/http's error log with the peer's address;
// through ErrorLog it is a JSON log line with the address truncated.
func TestErrorLog_PanicTruncatesPeer(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	srv.Config.ErrorLog = httpserver.ErrorLog(log)
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	srv.Close() // waits for the handler's goroutine, so the line is written
	out := buf.String()
	if !strings.Contains(out, `"msg":"http server error"`) || !strings.Contains(out, "panic serving 127.0.0.0:") {
		t.Fatalf("error log = %s; want the panic with the peer truncated to 127.0.0.0", out)
	}
	if strings.Contains(out, "127.0.0.1") {
		t.Errorf("error log holds the full peer address: %s", out)
	}
}
