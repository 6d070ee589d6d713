package egress_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"threatview/alerts/egress"
	"threatview/alerts/internal/egresstest"
)

func TestPublic(t *testing.T) {
	for s, want := range map[string]bool{
		"93.184.215.14": true, "2606:2800:21f:cb07:6820:80da:af6b:8b2c": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"0.0.0.0": false, "224.0.0.1": false, "255.255.255.255": false, "100.64.0.1": false,
		"::1": false, "::": false, "fe80::1": false, "fd00::1": false, "ff02::1": false,
		"::ffff:169.254.169.254": false, "::ffff:127.0.0.1": false, "::ffff:93.184.215.14": true,
		"64:ff9b::a9fe:a9fe": false, "2002:a9fe:a9fe::1": false,
	} {
		if got := egress.Public(netip.MustParseAddr(s)); got != want {
			t.Errorf("Public(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "siem.internal", "siem:0", "siem:x", ":514"} {
		if _, err := egress.ParsePolicy(bad); err == nil {
			t.Errorf("ParsePolicy(%q) = nil error, want one", bad)
		}
	}
	if _, err := egress.ParsePolicy(" 127.0.0.1/32, ::1 ,siem.internal:6514,[fd00::5]:443"); err != nil {
		t.Fatalf("ParsePolicy = %v", err)
	}
}

// TestGuard_Dial: the dial-time check is on the address the name resolves
// to at that moment, so a name pointed at the metadata service after it was
// accepted (DNS rebinding) is refused, and nothing is dialled.
func TestGuard_Dial(t *testing.T) {
	res := egresstest.Resolver{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":   {netip.MustParseAddr("::ffff:169.254.169.254")},
		"mixed.test":    {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.7")},
		"public.test":   {netip.MustParseAddr("93.184.215.14")},
		"siem.internal": {netip.MustParseAddr("10.20.0.5")},
		"ten.test":      {netip.MustParseAddr("10.20.0.6")},
	}
	policy, err := egress.ParsePolicy("127.0.0.1/32,siem.internal:6514")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr   string
		denied bool
		dialed string
	}{
		{"metadata.test:80", true, ""},
		{"mapped.test:80", true, ""},
		{"mixed.test:443", true, ""},
		{"169.254.169.254:80", true, ""},
		{"[::ffff:169.254.169.254]:80", true, ""},
		{"[fe80::1]:80", true, ""},
		{"siem.internal:514", true, ""}, // allowed on 6514 only
		{"ten.test:6514", true, ""},     // another name
		{"localhost:8080", true, ""},    // not in the resolver: refused as unresolvable
		{"public.test:443", false, "93.184.215.14:443"},
		{"siem.internal:6514", false, "10.20.0.5:6514"},
		{"127.0.0.1:9", false, "127.0.0.1:9"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			rec := &egresstest.Recorder{}
			g := &egress.Guard{Policy: policy, Resolver: res, Dial: rec.Dial}
			_, err := g.DialContext(context.Background(), "tcp", tc.addr)
			if tc.denied {
				if err == nil || (tc.addr != "localhost:8080" && !errors.Is(err, egress.ErrDenied)) {
					t.Fatalf("DialContext(%s) = %v, want refused", tc.addr, err)
				}
				if len(rec.Addrs()) != 0 {
					t.Fatalf("DialContext(%s) dialled %v", tc.addr, rec.Addrs())
				}
				return
			}
			if !errors.Is(err, egresstest.ErrRecorded) || len(rec.Addrs()) != 1 || rec.Addrs()[0] != tc.dialed {
				t.Fatalf("DialContext(%s) = %v, dialled %v; want exactly %s", tc.addr, err, rec.Addrs(), tc.dialed)
			}
		})
	}
}

// TestGuard_Check is the creation-time check: literal and resolved
// addresses alike.
func TestGuard_Check(t *testing.T) {
	res := egresstest.Resolver{"metadata.test": {netip.MustParseAddr("169.254.169.254")}, "public.test": {netip.MustParseAddr("93.184.215.14")}}
	policy, _ := egress.ParsePolicy("127.0.0.1/32")
	g := &egress.Guard{Policy: policy, Resolver: res}
	for host, denied := range map[string]bool{"metadata.test": true, "169.254.169.254": true, "[::1]": true, "::ffff:10.0.0.1": true,
		"10.0.0.1": true, "public.test": false, "127.0.0.1": false, "unknown.test": false} {
		if err := g.Check(context.Background(), host, "80"); (err != nil) != denied || err != nil && !errors.Is(err, egress.ErrDenied) {
			t.Errorf("Check(%s) = %v, want denied %v", host, err, denied)
		}
	}
}
