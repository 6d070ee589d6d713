// Command tokens runs the tokens service: it issues, lists, revokes and
// introspects app tokens (default port 8083).
package main

import "threatview/platform/cli"

func main() { cli.Main("tokens", run) }
