// Command alerts runs the alerts service: the API of alert rules and SIEM
// forwarders (default port 8089) and, on the one replica holding the leader
// lock, the evaluator and the forwarders.
package main

import "threatview/platform/cli"

func main() { cli.Main("alerts", run) }
