package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"threatview/loadtest/load"
	"threatview/loadtest/procstat"
	"threatview/loadtest/stats"
	"threatview/loadtest/verify"
)

// RunResult is what `run` writes to run.json.
type RunResult struct {
	Setup     Setup            `json:"setup"`
	Label     string           `json:"label"`
	Rate      float64          `json:"rate"`
	Warmup    time.Duration    `json:"warmup"`
	Duration  time.Duration    `json:"duration"`
	WarmupSum stats.Summary    `json:"warmup_summary"`
	Plan      stats.Summary    `json:"plan_summary"`
	Codes     string           `json:"codes"`
	Resources []procstat.Usage `json:"resources"`
	// Statements are the costliest PostgreSQL statements during the plan.
	Statements []Statement     `json:"statements,omitempty"`
	Manifest   verify.Manifest `json:"manifest"`
}

func cmdRun(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, getenv)
	rate := fs.Float64("rate", 105, "requests per second (open model)")
	warmup := fs.Duration("warmup", 2*time.Minute, "warm-up length (not in the results table)")
	dur := fs.Duration("duration", 10*time.Minute, "plan length")
	label := fs.String("label", "Application startup", "label of the results row")
	pidDir := fs.String("pids", envPidDir(getenv), "directory of NAME.pid files of the stack to sample (empty: none)")
	audited := fs.Bool("audited", true, "the collector audits (verify then expects audit rows)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tgt, err := c.target()
	if err != nil {
		return err
	}
	gen, err := c.generator(0)
	if err != nil {
		return err
	}
	ids, err := createIDsFile(c.out, "ids.txt")
	if err != nil {
		return err
	}
	defer ids.Close()
	sink := ids.Sink()

	res := RunResult{Setup: c.setup(nil), Label: *label, Rate: *rate, Warmup: *warmup, Duration: *dur}
	var warm load.Result
	if *warmup > 0 {
		warm, err = load.Open(ctx, tgt, gen, "warm-up", *rate, *warmup, sink, c.progress(stderr))
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		res.WarmupSum = warm.Summary()
	}
	procs := samplerProcs(*pidDir)
	stmtsBefore := pgStatements(ctx, getenv)
	sampler := procstat.Start(ctx, procs, time.Second)
	plan, err := load.Open(ctx, tgt, gen, *label, *rate, *dur, sink, c.progress(stderr))
	res.Resources = sampler.Stop()
	res.Statements = topStatements(stmtsBefore, pgStatements(ctx, getenv), 8)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := ids.Close(); err != nil {
		return err
	}
	res.Plan = plan.Summary()
	res.Codes = codesString(plan)
	start := plan.Start
	if *warmup > 0 {
		start = warm.Start
	}
	res.Manifest = verify.Manifest{
		IDsFile: ids.Path, AppID: c.app, Start: start, End: plan.End,
		Requests: warm.Accepted + plan.Accepted, Events: warm.EventsOK + plan.EventsOK, Audited: *audited,
	}
	if plan.IDsMissed+warm.IDsMissed > 0 {
		fmt.Fprintf(stderr, "warning: %d accepted responses had no readable ids\n", plan.IDsMissed+warm.IDsMissed)
	}
	rows := []stats.Summary{res.Plan}
	fmt.Fprint(stdout, stats.Text(rows))
	fmt.Fprintf(stdout, "responses: %s\n\n", res.Codes)
	fmt.Fprint(stdout, resourcesText(res.Resources))
	if err := writeJSON(c.out, "run.json", res); err != nil {
		return err
	}
	if err := writeCSV(c.out, "run.csv", summariesCSV(rows)); err != nil {
		return err
	}
	if err := writeCSV(c.out, "resources.csv", resourcesCSV(res.Resources)); err != nil {
		return err
	}
	return writeFile(c.out, "run.md", summariesMD(rows)+"\n"+resourcesMD(res.Resources))
}

func envPidDir(getenv func(string) string) string {
	if root := getenv("THREATVIEW_ROOT"); root != "" {
		return filepath.Join(root, ".run", "pid")
	}
	return ""
}

// samplerProcs lists the stack's processes plus this one (the load
// generator shares the machine, so its cost is part of the picture).
func samplerProcs(pidDir string) []procstat.Proc {
	var procs []procstat.Proc
	if pidDir != "" {
		if p, err := procstat.FromPidDir(pidDir); err == nil {
			procs = p
		}
	}
	return append(procs, procstat.Proc{Name: "loadtest (generator)", PID: os.Getpid()})
}

func resourcesText(us []procstat.Usage) string {
	var b []byte
	b = fmt.Appendf(b, "%-22s %10s %8s %12s %12s\n", "process", "cpu s", "cores", "peak RSS", "peak PSS")
	for _, u := range us {
		b = fmt.Appendf(b, "%-22s %10.2f %8.3f %12s %12s\n", u.Name, u.CPUSeconds, u.Cores(), mib(u.PeakRSS), mib(u.PeakPSS))
	}
	return string(b) + "\n"
}

func resourcesMD(us []procstat.Usage) string {
	b := []byte("| process | CPU seconds | cores (avg) | peak RSS | peak PSS |\n|---|---:|---:|---:|---:|\n")
	for _, u := range us {
		b = fmt.Appendf(b, "| %s | %.2f | %.3f | %s | %s |\n", u.Name, u.CPUSeconds, u.Cores(), mib(u.PeakRSS), mib(u.PeakPSS))
	}
	return string(b)
}

func resourcesCSV(us []procstat.Usage) [][]string {
	out := [][]string{{"process", "pid", "cpu_seconds", "wall_seconds", "cores", "peak_rss_bytes", "peak_pss_bytes"}}
	for _, u := range us {
		out = append(out, []string{u.Name, fmt.Sprint(u.PID), fmt.Sprintf("%.2f", u.CPUSeconds),
			fmt.Sprintf("%.1f", u.Wall.Seconds()), fmt.Sprintf("%.3f", u.Cores()), fmt.Sprint(u.PeakRSS), fmt.Sprint(u.PeakPSS)})
	}
	return out
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
