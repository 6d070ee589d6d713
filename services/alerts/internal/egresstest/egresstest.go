// Package egresstest holds a resolver and a dialer for tests of where the
// alerts service connects: names map to the addresses a test chooses (the
// metadata service's, a private one), and the dialer records the address it
// was asked for instead of connecting, so no test ever dials a
// non-loopback address.
package egresstest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"

	"threatview/alerts/egress"
)

// Resolver answers names from the map; nothing is looked up.
type Resolver map[string][]netip.Addr

// LookupNetIP answers from the map, or "no such host".
func (r Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// ErrRecorded is what Recorder's Dial returns.
var ErrRecorded = errors.New("recorded, not dialled")

// Recorder is a dialer that connects nowhere.
type Recorder struct {
	mu    sync.Mutex
	addrs []string
}

// Dial records addr and fails with ErrRecorded.
func (d *Recorder) Dial(_ context.Context, _, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, addr)
	return nil, ErrRecorded
}

// Addrs returns the addresses asked for so far.
func (d *Recorder) Addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// Rebound returns a guard under policy whose resolver maps
// "rebound.test" to 169.254.169.254 (a name accepted once, now pointed at
// the metadata service) and "public.test" to a public address, dialling
// through a new Recorder.
func Rebound(policy *egress.Policy) (*egress.Guard, *Recorder) {
	rec := &Recorder{}
	return &egress.Guard{Policy: policy, Dial: rec.Dial, Resolver: Resolver{
		"rebound.test": {netip.MustParseAddr("169.254.169.254")},
		"public.test":  {netip.MustParseAddr("93.184.215.14")},
	}}, rec
}
