// Command loadtest drives the local Threat View stack with simulated events
// and measures it: constant-rate runs, rate sweeps, closed-model user
// levels, the cost of auditing, CPU per request with profiles, the
// exactly-once and rollup promises, storage per event and a bulk load.
// Every load targets 127.0.0.1 only and stops by itself.
//
//	loadtest run|sweep|users|overhead|cpu|flame|verify|storage|bulk|report|sample [flags]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// LOADTEST_CPUPROFILE=FILE profiles the generator itself: it shares the
	// machine with the stack, so its own cost is part of every figure.
	if path := os.Getenv("LOADTEST_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
	}
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		if errors.Is(err, errVerifyFailed) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var commands = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error{
	"run":      cmdRun,
	"sweep":    cmdSweep,
	"users":    cmdUsers,
	"overhead": cmdOverhead,
	"cpu":      cmdCPU,
	"flame":    cmdFlame,
	"verify":   cmdVerify,
	"storage":  cmdStorage,
	"bulk":     cmdBulk,
	"report":   cmdReport,
	"sample":   cmdSample,
	"trend":    cmdTrend,
}

const usage = `usage: loadtest COMMAND [flags]

commands:
  run       warm-up then a constant-rate plan (open model); JMeter-style table, ids for verify
  sweep     rising rates until p95 passes the limit or errors appear; ids for verify -of sweep
  users     closed model: N users each sending back to back
  overhead  the same load against a collector with auditing on and one with it off
  cpu       CPU per accepted request (machine and per process), requests per broker message, pprof profiles
  flame     render a pprof CPU profile as a flame graph (SVG)
  verify    accepted ids stored exactly once, rollups equal count(*), audit rows = requests (-of run|sweep)
  storage   bytes per event per table and projection per day/month/3 months
  bulk      a bulk load of N records with concurrent senders (the reference's 1 million)
  report    write the performance page from the results of the other commands
  sample    print generated events (what the load sends)
  trend     guard: 105 req/s within 20 ms p95 and the highest held rate against the recorded history

Run "loadtest COMMAND -h" for the flags of a command.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return errors.New("no command")
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	return cmd(ctx, args[1:], getenv, stdout, stderr)
}
