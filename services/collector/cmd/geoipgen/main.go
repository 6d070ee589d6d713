// Command geoipgen writes the small MaxMind-format country database that
// tests and the local stack use (the ranges of geoip.TestNetworks).
//
//	geoipgen -out .run/geoip/test.mmdb
package main

import (
	"flag"
	"fmt"
	"os"

	"threatview/collector/geoip/testdb"
)

func main() {
	out := flag.String("out", "test.mmdb", "path of the database to write")
	flag.Parse()
	if err := testdb.Write(*out, nil); err != nil {
		fmt.Fprintln(os.Stderr, "geoipgen:", err)
		os.Exit(1)
	}
}
