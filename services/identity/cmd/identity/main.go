// Command identity runs the identity service: people, roles, sign-in
// (password or OIDC) and sessions (default port 8085).
package main

import "threatview/platform/cli"

func main() { cli.Main("identity", run) }
