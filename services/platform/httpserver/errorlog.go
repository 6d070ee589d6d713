package httpserver

import (
	stdlog "log"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
)

// addrs matches what may be an IP address in a line of net/http's error
// log: dotted IPv4, and IPv6 (bracketed before a port, or bare); a match
// that does not parse as an address is left as it is.
var addrs = regexp.MustCompile(`\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+(?:%[0-9A-Za-z._-]+)?\]|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?:%[0-9A-Za-z._-]+)?`)

// ScrubAddrs replaces every IP address in s by PrivateAddr's network
// address (IPv4 /24, IPv6 /48): "TLS handshake error from 203.0.113.77:51234"
// becomes "... from 203.0.113.0:51234".
func ScrubAddrs(s string) string {
	return addrs.ReplaceAllStringFunc(s, func(m string) string {
		inner, bracketed := strings.CutPrefix(m, "[")
		if bracketed {
			inner = strings.TrimSuffix(inner, "]")
		}
		a, err := netip.ParseAddr(inner)
		if err != nil {
			return m
		}
		p := PrivateAddr(a.WithZone(""))
		if a.Is4In6() {
			p = "::ffff:" + PrivateAddr(a.Unmap())
		}
		if bracketed {
			return "[" + p + "]"
		}
		return p
	})
}

// ErrorLog is an http.Server's ErrorLog that writes through log at level
// warn, with every peer address truncated (TLS handshake errors, panics
// and http2 errors name the peer's address and port).
func ErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(errorWriter{log}, "", 0)
}

type errorWriter struct{ log *slog.Logger }

func (w errorWriter) Write(p []byte) (int, error) {
	w.log.Warn("http server error", "error", ScrubAddrs(strings.TrimSuffix(string(p), "\n")))
	return len(p), nil
}
