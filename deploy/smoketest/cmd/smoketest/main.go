// Command smoketest is the chart's `helm test` Pod: one event in, counted out
// (see package smoketest). --version prints the version and exits.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"threatview/smoketest"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println("smoketest", version)
		return
	}
	cfg, err := smoketest.Load(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "smoketest:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := smoketest.Run(ctx, cfg, &http.Client{Timeout: 10 * time.Second}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "smoketest:", err)
		os.Exit(1)
	}
}
