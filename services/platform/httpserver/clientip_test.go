package httpserver

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"untrusted peer ignores the header", "203.0.113.9:1234", []string{"198.51.100.1"}, "203.0.113.9"},
		{"trusted peer names the client", "10.1.2.3:1234", []string{"198.51.100.1"}, "198.51.100.1"},
		{"rightmost untrusted hop", "10.1.2.3:1234", []string{"192.0.2.1, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"only the last header", "10.1.2.3:1234", []string{"192.0.2.66", "198.51.100.1"}, "198.51.100.1"},
		{"garbled hop stops the walk", "10.1.2.3:1234", []string{"192.0.2.1, junk"}, "10.1.2.3"},
		{"mapped v4", "[::ffff:10.1.2.3]:1", []string{"198.51.100.1"}, "198.51.100.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.remote
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := ClientAddr(r, trusted).String(); got != c.want {
				t.Errorf("ClientAddr(%s, %q) = %s, want %s", c.remote, c.xff, got, c.want)
			}
		})
	}
}

func TestPrivateAddr(t *testing.T) {
	for in, want := range map[string]string{"198.51.100.77": "198.51.100.0", "2001:db8:1:2:3::9": "2001:db8:1::"} {
		if got := PrivateAddr(netip.MustParseAddr(in)); got != want {
			t.Errorf("PrivateAddr(%s) = %s, want %s", in, got, want)
		}
	}
	if got := PrivateAddr(netip.Addr{}); got != "" {
		t.Errorf("PrivateAddr(zero) = %q, want empty", got)
	}
}

func TestForwarderKey(t *testing.T) {
	a, b := ForwarderKey("internal-one"), ForwarderKey("internal-two")
	if len(a) != 64 || a == b || a != ForwarderKey("internal-one") || a == "internal-one" {
		t.Errorf("ForwarderKey = %q, %q: want 64 hex digits, stable per internal key, different across keys", a, b)
	}
	if got := ForwarderKey(""); got != "" {
		t.Errorf(`ForwarderKey("") = %q, want ""`, got)
	}
}
