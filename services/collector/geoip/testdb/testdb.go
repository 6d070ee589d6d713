// Package testdb writes the project's small MaxMind-format country
// database: the ranges of geoip.TestNetworks, each mapped to its country in
// the GeoLite2-Country record layout ({"country": {"iso_code": ...}}).
// cmd/geoipgen and tests use it.
package testdb

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"threatview/collector/geoip"
)

// Write builds the database from networks (geoip.TestNetworks when nil) and
// renames it into place at path, so a collector watching the path never
// reads a half-written file.
func Write(path string, networks []geoip.TestNetwork) error {
	if networks == nil {
		networks = geoip.TestNetworks
	}
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType:            "ThreatView-Test-Country",
		Description:             map[string]string{"en": "Threat View test country database"},
		IncludeReservedNetworks: true,
		RecordSize:              24,
	})
	if err != nil {
		return err
	}
	for _, n := range networks {
		_, network, err := net.ParseCIDR(n.CIDR)
		if err != nil {
			return fmt.Errorf("parse %s: %w", n.CIDR, err)
		}
		rec := mmdbtype.Map{
			"country":            mmdbtype.Map{"iso_code": mmdbtype.String(n.Country)},
			"registered_country": mmdbtype.Map{"iso_code": mmdbtype.String(n.Country)},
		}
		if err := tree.Insert(network, rec); err != nil {
			return fmt.Errorf("insert %s: %w", n.CIDR, err)
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".geoip-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tree.WriteTo(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
