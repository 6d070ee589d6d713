// Command admininterface runs the operators' web UI (default port 8087):
// sign-in through identity, apps and tokens, the audit trail, system
// status, dead-letter queues and the dashboards.
package main

import "threatview/platform/cli"

func main() { cli.Main("admininterface", run) }
