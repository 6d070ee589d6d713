// Package egress decides where the alerts service may connect on behalf of
// the people who configure it: webhooks, Slack URLs and forwarder
// destinations. Private, loopback, link-local, unspecified, multicast and
// other special-purpose addresses (IPv4 and IPv6, IPv4-mapped too) are
// refused unless an operator's allow-list names them. Destinations are
// checked when they are created (a clear 422) and again on every dial, on
// the address the name resolved to then, so a name that later resolves to
// an internal address (DNS rebinding) is refused too.
package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// ErrDenied means the destination is not one the service may connect to.
var ErrDenied = errors.New("destination not allowed")

// special are ranges beside those netip classifies (private, loopback,
// link-local, multicast, unspecified) that reach no public host or that
// embed an IPv4 address a gateway would reach for us.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 (embeds IPv4)
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, Teredo
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4 (embeds IPv4)
}

// Public reports whether a is a public unicast address: none of the
// private, loopback, link-local, multicast, unspecified or special ranges,
// judged on the IPv4 address inside an IPv4-mapped IPv6 one.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range special {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Policy is the operator's allow-list: address ranges (any port) and
// host:port pairs (that host name or address, that port only).
type Policy struct {
	prefixes  []netip.Prefix
	hostPorts map[string]bool
}

// ParsePolicy reads a comma-separated allow-list: CIDRs ("127.0.0.1/32",
// "10.20.0.0/16", "fd00::/8"), single addresses (as /32 or /128), and
// host:port pairs ("siem.internal:6514", "[fd00::5]:443").
func ParsePolicy(s string) (*Policy, error) {
	p := &Policy{hostPorts: map[string]bool{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if pre, err := netip.ParsePrefix(item); err == nil {
			p.prefixes = append(p.prefixes, pre.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil {
			p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		host, port, err := net.SplitHostPort(item)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: want a CIDR, an address or host:port", item)
		}
		p.hostPorts[strings.ToLower(host)+":"+port] = true
	}
	return p, nil
}

// allowed reports whether p lets host:port, resolved to a, through.
func (p *Policy) allowed(host, port string, a netip.Addr) bool {
	if Public(a) {
		return true
	}
	if p == nil {
		return false
	}
	if p.hostPorts[strings.ToLower(host)+":"+port] {
		return true
	}
	a = a.Unmap()
	for _, pre := range p.prefixes {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// Resolver looks host names up (*net.Resolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to an address already checked.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Guard checks and dials destinations under a Policy. The zero Resolver and
// Dial are the system's.
type Guard struct {
	Policy   *Policy
	Resolver Resolver
	Dial     DialFunc
	// Timeout bounds a dial when Dial is nil (default 15 s).
	Timeout time.Duration
}

// NewGuard returns a Guard with the system's resolver and dialer.
func NewGuard(p *Policy) *Guard { return &Guard{Policy: p} }

func (g *Guard) resolver() Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

// resolve returns host's addresses: itself when it is an address literal.
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := g.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address", host)
	}
	return addrs, nil
}

// Check reports ErrDenied when host (a name or an address) on port resolves
// to any address the policy does not allow. A name that does not resolve
// now is let through: the dial checks it again.
func (g *Guard) Check(ctx context.Context, host, port string) error {
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil //nolint:nilerr // checked again at every dial
	}
	for _, a := range addrs {
		if !g.Policy.allowed(host, port, a) {
			return fmt.Errorf("%w: %s resolves to a private, loopback, link-local or special-purpose address", ErrDenied, host)
		}
	}
	return nil
}

// DialContext resolves addr's host, refuses it with ErrDenied when any of
// its addresses is not allowed, and dials the first allowed address that
// answers: the address checked is the address connected to.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if !g.Policy.allowed(host, port, a) {
			return nil, fmt.Errorf("%w: %s resolved to a private, loopback, link-local or special-purpose address", ErrDenied, host)
		}
	}
	dial := g.Dial
	if dial == nil {
		timeout := g.Timeout
		if timeout <= 0 {
			timeout = 15 * time.Second
		}
		d := &net.Dialer{Timeout: timeout}
		dial = d.DialContext
	}
	var errs []error
	for _, a := range addrs {
		c, err := dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// Transport returns an HTTP transport that dials through g (nil:
// NewGuard(nil)) and uses no proxy: a proxy would connect for us, past the
// check.
func Transport(g *Guard, tlsConf *tls.Config) *http.Transport {
	if g == nil {
		g = NewGuard(nil)
	}
	return &http.Transport{DialContext: g.DialContext, TLSClientConfig: tlsConf, ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second}
}
