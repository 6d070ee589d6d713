// Command cleanup drops monthly partitions older than the retention, once,
// and exits non-zero when it fails or refuses a partition (see package
// retention). Flags: --dry-run lists what it would drop and drops nothing.
package main

import "threatview/platform/cli"

func main() { cli.MainArgs("cleanup", run) }
