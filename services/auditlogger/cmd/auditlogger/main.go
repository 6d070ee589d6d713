// Command auditlogger is audit-logger: POST /v1/audit publishes audit
// records to the audit queue (group commit, 202 once durable), GET
// /v1/audit pages through the stored trail. Listens on :8081.
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
		fmt.Fprintln(os.Stderr, "auditlogger:", err)
		os.Exit(1)
	}
}
