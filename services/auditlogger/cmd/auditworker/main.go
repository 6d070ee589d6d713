// Command auditworker is audit-logger-worker: exactly one active instance
// (a MariaDB named lock) consumes the audit queue and stores the records in
// audit_events. Ops endpoints (/healthz, /readyz, /metrics) listen on :8084.
package main

import "threatview/platform/cli"

func main() { cli.Main("auditworker", run) }
