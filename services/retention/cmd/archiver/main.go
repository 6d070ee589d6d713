// Command archiver archives every finished month that has no verified
// archive yet, once, and exits non-zero on failure:
//
//	archiver [--force] [--table events.events] [--month 2026-08]
//	archiver restore --table events.events --month 2026-08
//
// restore loads an archived month back into its table (creating the
// partition if missing); running it again changes nothing.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		os.Exit(1)
	}
}
