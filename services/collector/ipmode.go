package collector

import (
	"fmt"
	"net/netip"
)

// IPMode says how much of the client address the collector keeps once it
// has looked up the country: the address never leaves the process in a
// fuller form (event, audit record, log line or metric).
type IPMode string

// The IP modes (COLLECTOR_CLIENT_IP).
const (
	// IPTruncate keeps the network: IPv4 /24, IPv6 /48 (the default).
	IPTruncate IPMode = "truncate"
	// IPNone keeps no address at all.
	IPNone IPMode = "none"
	// IPFull keeps the whole address (an explicit choice, never a default).
	IPFull IPMode = "full"
)

// Prefix lengths kept by IPTruncate.
const (
	TruncateBits4 = 24
	TruncateBits6 = 48
)

// ParseIPMode returns the mode named s; "" is IPTruncate.
func ParseIPMode(s string) (IPMode, error) {
	switch m := IPMode(s); m {
	case "":
		return IPTruncate, nil
	case IPTruncate, IPNone, IPFull:
		return m, nil
	}
	return "", fmt.Errorf("client IP mode %q: want truncate, none or full", s)
}

// Keep returns the form of a that may be stored: "" for an invalid address
// or IPNone, the /24 or /48 network address for IPTruncate (and for an
// unknown mode), the whole address for IPFull.
func (m IPMode) Keep(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	a = a.Unmap().WithZone("")
	switch m {
	case IPNone:
		return ""
	case IPFull:
		return a.String()
	}
	bits := TruncateBits6
	if a.Is4() {
		bits = TruncateBits4
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return ""
	}
	return p.Addr().String()
}
