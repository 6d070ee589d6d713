package geoip_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"threatview/collector/geoip"
	"threatview/collector/geoip/testdb"
)

func TestReader_Country(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.mmdb")
	if err := testdb.Write(path, nil); err != nil {
		t.Fatalf("Write = %v", err)
	}
	r, err := geoip.Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	if err := r.Check(context.Background()); err != nil {
		t.Fatalf("Check = %v", err)
	}
	for _, n := range geoip.TestNetworks {
		if got := r.Country(netip.MustParseAddr(n.IP)); got != n.Country {
			t.Errorf("Country(%s) = %s, want %s", n.IP, got, n.Country)
		}
	}
	for _, ip := range []string{"192.0.2.1", "8.8.8.8", "::1", "2001:db8:300::1"} {
		if got := r.Country(netip.MustParseAddr(ip)); got != "ZZ" {
			t.Errorf("Country(%s) = %s, want ZZ", ip, got)
		}
	}
	if got := r.Country(netip.Addr{}); got != "ZZ" {
		t.Errorf("Country(zero) = %s, want ZZ", got)
	}
}

func TestReader_Watch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.mmdb")
	if err := testdb.Write(path, []geoip.TestNetwork{{CIDR: "1.0.0.0/24", Country: "AU"}}); err != nil {
		t.Fatal(err)
	}
	r, err := geoip.Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("1.0.0.10")
	if got := r.Country(ip); got != "AU" {
		t.Fatalf("Country = %s, want AU", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx, 10*time.Millisecond)

	// A broken file keeps the old database.
	if err := os.WriteFile(path+".tmp", []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := r.Country(ip); got != "AU" {
		t.Fatalf("after a broken file Country = %s, want AU kept", got)
	}

	if err := testdb.Write(path, []geoip.TestNetwork{{CIDR: "1.0.0.0/24", Country: "NZ"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.Country(ip) != "NZ" {
		if time.Now().After(deadline) {
			t.Fatalf("Country = %s after rewrite, want NZ (reloads %d)", r.Country(ip), r.Reloads())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpen_Missing(t *testing.T) {
	if _, err := geoip.Open(filepath.Join(t.TempDir(), "none.mmdb"), slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("Open(missing) = nil error")
	}
}
