// Command auditlogger is audit-logger: POST /v1/audit publishes audit
// records to the audit queue (group commit, 202 once durable), GET
// /v1/audit pages through the stored trail. Listens on :8081.
package main

import "threatview/platform/cli"

func main() { cli.Main("auditlogger", run) }
