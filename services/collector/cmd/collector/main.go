// Command collector is the data collector: the HTTP ingest API that makes
// app events durable on the broker before it answers 202.
package main

import "threatview/platform/cli"

func main() { cli.Main("collector", run) }
