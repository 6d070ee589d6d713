// Command archiver archives every finished month that has no verified
// archive yet, once, and exits non-zero on failure:
//
//	archiver [--force] [--table events.events] [--month 2026-08]
//	archiver restore --table events.events --month 2026-08
//
// restore loads an archived month back into its table (creating the
// partition if missing); running it again changes nothing.
package main

import "threatview/platform/cli"

func main() { cli.MainArgs("archiver", run) }
