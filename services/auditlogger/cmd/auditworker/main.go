// Command auditworker is audit-logger-worker: exactly one active instance
// (a MariaDB named lock) consumes the audit queue and stores the records in
// audit_events. Ops endpoints (/healthz, /readyz, /metrics) listen on :8084.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "auditworker:", err)
		os.Exit(1)
	}
}
