// Command cleanup drops monthly partitions older than the retention, once,
// and exits non-zero when it fails or refuses a partition (see package
// retention). Flags: --dry-run lists what it would drop and drops nothing.
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
