// Command auditverify verifies the audit trail offline: every row of the
// audit database against the signed checkpoints and the leaves kept outside
// the database, and every checkpoint's signature against the public keys it
// is given (never keys read from the database). It prints each problem, one
// line per bad row or checkpoint, and exits 1 when there is any (2 when the
// check could not run). Run by the chart's CronJob, or by hand.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"threatview/platform/cli"
)

// main does not use cli.Main: its exit status tells a bad trail (1) from a
// check that could not run (2).
func main() {
	if cli.IsVersionRequest(os.Args[1:]) {
		fmt.Printf("auditverify %s\n", cli.Version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "auditverify:", err)
		if err == errProblems {
			os.Exit(1)
		}
		os.Exit(2)
	}
}
