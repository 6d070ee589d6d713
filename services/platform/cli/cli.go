// Package cli is the main function every Threat View command shares: a
// context cancelled by SIGINT or SIGTERM, the process environment and
// stdout handed to the command's testable run function, and exit status 1
// with the error on stderr when run fails.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// Version is the build's version, printed by --version. Release builds set it
// with -ldflags "-X threatview/platform/cli.Version=..." (make images does).
var Version = "dev"

// serviceName is the name Main or MainArgs was given, nil before.
var serviceName atomic.Pointer[string]

// Name returns the command's name as given to Main or MainArgs, or "" when
// neither ran (as in tests that call a run function directly).
func Name() string {
	if p := serviceName.Load(); p != nil {
		return *p
	}
	return ""
}

// RunFunc is a service's entry point: it returns when ctx is cancelled (a
// clean shutdown returns nil) or when it fails.
type RunFunc func(ctx context.Context, getenv func(string) string, stdout io.Writer) error

// RunArgsFunc is a command's entry point that also takes its arguments.
type RunArgsFunc func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// Main runs run and exits non-zero when it fails.
func Main(name string, run RunFunc) {
	MainArgs(name, func(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
		return run(ctx, getenv, stdout)
	})
}

// MainArgs runs run with the command-line arguments and exits non-zero when
// it fails.
func MainArgs(name string, run RunArgsFunc) {
	serviceName.Store(&name)
	if IsVersionRequest(os.Args[1:]) {
		fmt.Fprintf(os.Stdout, "%s %s\n", name, Version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// IsVersionRequest reports whether args ask for the version only: exactly
// "--version" or "-version". Every command answers it without reading its
// configuration, so an image can be checked by running its binary.
func IsVersionRequest(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version")
}
