// Command privacy serves the erasure API (POST /v1/erasures, GET
// /v1/erasures/{id}, suppressions) and runs the erasure jobs (see package
// privacy). Default port 8088.
package main

import "threatview/platform/cli"

func main() { cli.Main("privacy", run) }
