package httpserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr returns the address of the client behind r: the connection's
// peer, or, when the peer is one of trusted (a proxy or a service that signs
// people in on behalf of their browsers), the rightmost X-Forwarded-For
// address that is not itself trusted. Only the last X-Forwarded-For header
// counts (a client can send its own first one), and a garbled hop ends the
// walk. The zero Addr means the peer's address did not parse.
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	client := peer.Unmap().WithZone("")
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 || !inPrefixes(trusted, client) {
		return client
	}
	hops := strings.Split(xff[len(xff)-1], ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return client
		}
		client = a.Unmap().WithZone("")
		if !inPrefixes(trusted, client) {
			break
		}
	}
	return client
}

func inPrefixes(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// PrivateAddr is what logs and audit records keep of a client address: its
// network (IPv4 /24, IPv6 /48), never the full address. The zero Addr gives
// "".
func PrivateAddr(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return ""
	}
	return p.Addr().String()
}

// ParsePrefixes parses CIDRs (or single addresses) such as a
// *_TRUSTED_PROXIES variable's list; blank entries are skipped.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, err
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ForwarderKey derives, from the internal key every service of a deployment
// shares, the key with which a service that signs people in on behalf of
// their browsers (the admin interface) names their addresses to identity
// (X-Forwarder-Key). Both sides derive the same key when none is configured,
// so a deployment needs no extra secret; the internal key itself is never
// sent for this.
func ForwarderKey(internalKey string) string {
	if internalKey == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(internalKey))
	m.Write([]byte("threatview identity forwarder key v1"))
	return hex.EncodeToString(m.Sum(nil))
}
