// Package geoip looks up the country of an IP address in a MaxMind-format
// database (GeoLite2-Country, GeoIP2-Country or the project's generated test
// database) and reloads the file when it changes.
//
// The file is read into memory rather than memory-mapped, so that a reload
// can swap readers atomically while lookups on the old one finish safely.
package geoip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/oschwald/maxminddb-golang/v2"

	"threatview/collector"
)

// Reader answers country lookups from the current database.
type Reader struct {
	path string
	log  *slog.Logger
	db   atomic.Pointer[maxminddb.Reader]
	// stamp is the (mtime, size) of the loaded file.
	mtime time.Time
	size  int64
	// Reloads counts successful reloads after the first load.
	reloads atomic.Int64
}

// Open loads the database at path. Call Watch to pick up later changes.
func Open(path string, log *slog.Logger) (*Reader, error) {
	r := &Reader{path: path, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) load() error {
	st, err := os.Stat(r.path)
	if err != nil {
		return fmt.Errorf("geoip: %w", err)
	}
	data, err := os.ReadFile(r.path)
	if err != nil {
		return fmt.Errorf("geoip: %w", err)
	}
	db, err := maxminddb.OpenBytes(data)
	if err != nil {
		return fmt.Errorf("geoip: open %s: %w", r.path, err)
	}
	r.db.Store(db)
	r.mtime, r.size = st.ModTime(), st.Size()
	return nil
}

// Watch polls the file's modification time and size every interval until
// ctx ends and reloads it when they change. A file that fails to load is
// logged and the previous database stays in use.
func (r *Reader) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.reloadIfChanged()
	}
}

// reloadIfChanged reloads the file when its stamp changed; it reports
// whether it did.
func (r *Reader) reloadIfChanged() bool {
	st, err := os.Stat(r.path)
	if err != nil {
		r.log.Warn("geoip database not readable", "path", r.path, "err", err)
		return false
	}
	if st.ModTime().Equal(r.mtime) && st.Size() == r.size {
		return false
	}
	if err := r.load(); err != nil {
		r.log.Error("geoip reload failed", "path", r.path, "err", err)
		// Do not retry the same broken file every tick.
		r.mtime, r.size = st.ModTime(), st.Size()
		return false
	}
	r.reloads.Add(1)
	r.log.Info("geoip database reloaded", "path", r.path)
	return true
}

// Reloads returns how many times the database was reloaded.
func (r *Reader) Reloads() int64 { return r.reloads.Load() }

// record is the part of a country database record we read.
type record struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	RegisteredCountry struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"registered_country"`
}

// Country returns the ISO 3166-1 alpha-2 code of ip's country, or
// collector.UnknownCountry.
func (r *Reader) Country(ip netip.Addr) string {
	db := r.db.Load()
	if db == nil || !ip.IsValid() {
		return collector.UnknownCountry
	}
	var rec record
	if err := db.Lookup(ip).Decode(&rec); err != nil {
		return collector.UnknownCountry
	}
	code := rec.Country.ISOCode
	if code == "" {
		code = rec.RegisteredCountry.ISOCode
	}
	if len(code) != 2 {
		return collector.UnknownCountry
	}
	return code
}

// Check reports whether a database is loaded (for /readyz).
func (r *Reader) Check(context.Context) error {
	if r.db.Load() == nil {
		return errors.New("geoip database not loaded")
	}
	return nil
}

// TestNetwork is one range of the generated test database.
type TestNetwork struct {
	CIDR    string
	Country string
	// IP is an address inside CIDR, handy for tests and load generators.
	IP string
}

// TestNetworks are the ranges cmd/geoipgen writes into the test database,
// with their country. Tests and the load generator pick client addresses
// from here (sent as X-Forwarded-For through a trusted proxy) to get
// known countries. Any other address is ZZ.
var TestNetworks = []TestNetwork{
	{"1.0.0.0/24", "AU", "1.0.0.10"},
	{"2.16.0.0/16", "FR", "2.16.1.10"},
	{"3.0.0.0/16", "US", "3.0.1.10"},
	{"5.62.0.0/16", "GB", "5.62.1.10"},
	{"14.0.0.0/16", "JP", "14.0.1.10"},
	{"27.0.0.0/16", "IN", "27.0.1.10"},
	{"31.0.0.0/16", "DE", "31.0.1.10"},
	{"36.0.0.0/16", "CN", "36.0.1.10"},
	{"37.0.0.0/16", "NL", "37.0.1.10"},
	{"41.0.0.0/16", "ZA", "41.0.1.10"},
	{"43.0.0.0/16", "KR", "43.0.1.10"},
	{"45.0.0.0/16", "BR", "45.0.1.10"},
	{"46.0.0.0/16", "RU", "46.0.1.10"},
	{"62.0.0.0/16", "IT", "62.0.1.10"},
	{"77.0.0.0/16", "ES", "77.0.1.10"},
	{"78.0.0.0/16", "SE", "78.0.1.10"},
	{"91.0.0.0/16", "PL", "91.0.1.10"},
	{"99.0.0.0/16", "CA", "99.0.1.10"},
	{"101.0.0.0/16", "SG", "101.0.1.10"},
	{"177.0.0.0/16", "MX", "177.0.1.10"},
	{"2001:db8:100::/48", "AU", "2001:db8:100::10"},
	{"2001:db8:200::/48", "DE", "2001:db8:200::10"},
}
