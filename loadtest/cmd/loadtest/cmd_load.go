package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"threatview/loadtest/load"
	"threatview/loadtest/plot"
	"threatview/loadtest/stats"
	"threatview/loadtest/verify"
)

// SweepStep is one rate of a sweep.
type SweepStep struct {
	Rate    float64       `json:"rate"`
	Summary stats.Summary `json:"summary"`
	Codes   string        `json:"codes"`
	Held    bool          `json:"held"`
}

// SweepResult is what `sweep` writes to sweep.json.
type SweepResult struct {
	Setup    Setup         `json:"setup"`
	Step     time.Duration `json:"step"`
	P95Limit time.Duration `json:"p95_limit"`
	Steps    []SweepStep   `json:"steps"`
	Held     float64       `json:"held_rate"` // highest rate that held; 0 if none
	// Fresh says the stack was restarted (and warmed) just before this
	// sweep, as `-fresh` declares; the sweep does not restart it itself.
	Fresh bool `json:"fresh,omitempty"`
	// Manifest is what `verify -of sweep` checks: every id the sweep's
	// lead-ins and steps got back with a 202, in sweep-ids.txt.
	Manifest *verify.Manifest `json:"manifest,omitempty"`
}

// sweepIDsFile holds a sweep's accepted ids, beside sweep.json (a run's are
// in ids.txt, so both can share a directory).
const sweepIDsFile = "sweep-ids.txt"

func cmdSweep(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, getenv)
	rates := fs.String("rates", "105,250,500,750,1000,1250,1500,2000,2500,3000", "rates to try, ascending")
	step := fs.Duration("step", 30*time.Second, "length of each rate")
	warm := fs.Duration("step-warmup", 3*time.Second, "unmeasured lead-in at each rate")
	pause := fs.Duration("pause", 3*time.Second, "pause between rates (lets queues drain)")
	limit := fs.Duration("p95", 20*time.Millisecond, "p95 limit")
	keepGoing := fs.Int("past", 1, "rates to try past the first that fails (for the plot)")
	fresh := fs.Bool("fresh", false, "record that the stack was freshly restarted before this sweep (scripts/bench.sh SWEEP_FRESH=1 does the restart)")
	audited := fs.Bool("audited", true, "the collector audits (verify -of sweep then expects audit rows)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rs, err := parseInts(*rates)
	if err != nil {
		return fmt.Errorf("-rates: %w", err)
	}
	tgt, err := c.target()
	if err != nil {
		return err
	}
	ids, err := createIDsFile(c.out, sweepIDsFile)
	if err != nil {
		return err
	}
	defer ids.Close()
	sink := ids.Sink()
	m := verify.Manifest{IDsFile: ids.Path, AppID: c.app, Audited: *audited}
	missed := 0
	count := func(r load.Result) {
		if m.Start.IsZero() {
			m.Start = r.Start
		}
		m.End = r.End
		m.Requests += r.Accepted
		m.Events += r.EventsOK
		missed += r.IDsMissed
	}
	res := SweepResult{Setup: c.setup(nil), Step: *step, P95Limit: *limit, Fresh: *fresh}
	failures := 0
	for i, r := range rs {
		gen, err := c.generator(uint64(100 + i))
		if err != nil {
			return err
		}
		if *warm > 0 {
			lead, err := load.Open(ctx, tgt, gen, fmt.Sprintf("%d/s lead-in", r), float64(r), *warm, sink, nil)
			count(lead)
			if err != nil {
				return err
			}
		}
		out, err := load.Open(ctx, tgt, gen, fmt.Sprintf("%d/s", r), float64(r), *step, sink, c.progress(stderr))
		count(out)
		if err != nil {
			return err
		}
		s := out.Summary()
		held := s.Failed == 0 && s.P95 <= *limit && s.Throughput() >= 0.95*float64(r)
		res.Steps = append(res.Steps, SweepStep{Rate: float64(r), Summary: s, Codes: codesString(out), Held: held})
		fmt.Fprintf(stderr, "sweep %d/s: p95 %s ms, %d failed, %.1f/s -> %s\n", r, stats.Ms(s.P95), s.Failed, s.Throughput(), map[bool]string{true: "held", false: "missed"}[held])
		if held && failures == 0 {
			res.Held = float64(r)
		}
		if !held {
			failures++
			if failures > *keepGoing {
				break
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i < len(rs)-1 && *pause > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(*pause):
			}
		}
	}
	if err := ids.Close(); err != nil {
		return err
	}
	res.Manifest = &m
	if missed > 0 {
		fmt.Fprintf(stderr, "warning: %d accepted responses had no readable ids\n", missed)
	}
	rows := make([]stats.Summary, len(res.Steps))
	for i, s := range res.Steps {
		rows[i] = s.Summary
	}
	fmt.Fprint(stdout, stats.Text(rows))
	fmt.Fprintf(stdout, "highest rate that held (p95 ≤ %s, 0 errors): %.0f req/s\n", *limit, res.Held)
	if err := writeJSON(c.out, "sweep.json", res); err != nil {
		return err
	}
	if err := writeCSV(c.out, "sweep.csv", summariesCSV(rows)); err != nil {
		return err
	}
	var svg bytes.Buffer
	if err := sweepChart(res).WriteSVG(&svg); err != nil {
		return err
	}
	if err := writeFile(c.out, "sweep.svg", svg.String()); err != nil {
		return err
	}
	return writeFile(c.out, "sweep.md", summariesMD(rows))
}

func sweepChart(res SweepResult) plot.Chart {
	series := []plot.Series{{Name: "median"}, {Name: "90th pct"}, {Name: "95th pct"}, {Name: "99th pct"}}
	for _, s := range res.Steps {
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		x := s.Rate
		series[0].Points = append(series[0].Points, plot.Point{X: x, Y: ms(s.Summary.Median)})
		series[1].Points = append(series[1].Points, plot.Point{X: x, Y: ms(s.Summary.P90)})
		series[2].Points = append(series[2].Points, plot.Point{X: x, Y: ms(s.Summary.P95)})
		series[3].Points = append(series[3].Points, plot.Point{X: x, Y: ms(s.Summary.P99)})
	}
	return plot.Chart{
		Title: "Latency percentiles against request rate (POST /v1/events)", XLabel: "requests per second (open model)",
		YLabel: "latency (ms)", Series: series,
		Threshold: float64(res.P95Limit) / float64(time.Millisecond), ThreshTxt: "p95 target",
	}
}

// UsersLevel is one concurrency level of `users`.
type UsersLevel struct {
	Users   int           `json:"users"`
	Summary stats.Summary `json:"summary"`
	Codes   string        `json:"codes"`
}

// UsersResult is what `users` writes to users.json.
type UsersResult struct {
	Setup    Setup         `json:"setup"`
	Duration time.Duration `json:"duration"`
	Levels   []UsersLevel  `json:"levels"`
}

func cmdUsers(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("users", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, getenv)
	levels := fs.String("users", "5,100,500,1000", "concurrency levels")
	dur := fs.Duration("duration", 30*time.Second, "length of each level")
	pause := fs.Duration("pause", 3*time.Second, "pause between levels")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ls, err := parseInts(*levels)
	if err != nil {
		return fmt.Errorf("-users: %w", err)
	}
	tgt, err := c.target()
	if err != nil {
		return err
	}
	res := UsersResult{Setup: c.setup(nil), Duration: *dur}
	for i, n := range ls {
		gen, err := c.generator(uint64(200 + i))
		if err != nil {
			return err
		}
		out, err := load.Closed(ctx, tgt, gen, fmt.Sprintf("%d users", n), n, *dur, 0, nil, c.progress(stderr))
		if err != nil {
			return err
		}
		res.Levels = append(res.Levels, UsersLevel{Users: n, Summary: out.Summary(), Codes: codesString(out)})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i < len(ls)-1 {
			time.Sleep(*pause)
		}
	}
	rows := make([]stats.Summary, len(res.Levels))
	for i, l := range res.Levels {
		rows[i] = l.Summary
	}
	fmt.Fprint(stdout, stats.Text(rows))
	if err := writeJSON(c.out, "users.json", res); err != nil {
		return err
	}
	if err := writeCSV(c.out, "users.csv", summariesCSV(rows)); err != nil {
		return err
	}
	return writeFile(c.out, "users.md", summariesMD(rows))
}

// OverheadResult is what `overhead` writes to overhead.json.
type OverheadResult struct {
	Setup     Setup         `json:"setup"`
	Rate      float64       `json:"rate"`
	Users     int           `json:"users"`
	Duration  time.Duration `json:"duration"`
	On        stats.Summary `json:"on"`
	Off       stats.Summary `json:"off"`
	OnClosed  stats.Summary `json:"on_closed"`
	OffClosed stats.Summary `json:"off_closed"`
	// DropPct is the closed-model throughput lost to auditing, in percent.
	DropPct float64 `json:"drop_pct"`
}

func cmdOverhead(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, getenv)
	offURL := fs.String("off-url", "", "base URL of a collector with auditing off (blank AUDITLOGGER_SERVICE_URL); required")
	rate := fs.Float64("rate", 500, "open-model rate for the latency comparison")
	users := fs.Int("users", 50, "closed-model users for the throughput comparison (0: skip)")
	dur := fs.Duration("duration", 20*time.Second, "length of each of the four phases")
	warm := fs.Duration("warmup", 5*time.Second, "unmeasured lead-in before each phase (token cache, connections)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *offURL == "" {
		return fmt.Errorf("-off-url is required: start a collector with AUDITLOGGER_SERVICE_URL blank (scripts/bench.sh does)")
	}
	on, err := c.target()
	if err != nil {
		return err
	}
	off := on
	off.URL = *offURL
	if _, err := load.CheckTarget(off.URL); err != nil {
		return err
	}
	res := OverheadResult{Setup: c.setup(map[string]string{"off_url": *offURL}), Rate: *rate, Users: *users, Duration: *dur}
	phase := func(name string, t load.Target, seed uint64, closed bool) (stats.Summary, error) {
		gen, err := c.generator(seed)
		if err != nil {
			return stats.Summary{}, err
		}
		if *warm > 0 {
			if _, err := load.Open(ctx, t, gen, name+" lead-in", *rate, *warm, nil, nil); err != nil {
				return stats.Summary{}, err
			}
		}
		var out load.Result
		if closed {
			out, err = load.Closed(ctx, t, gen, name, *users, *dur, 0, nil, c.progress(stderr))
		} else {
			out, err = load.Open(ctx, t, gen, name, *rate, *dur, nil, c.progress(stderr))
		}
		if err != nil {
			return stats.Summary{}, err
		}
		time.Sleep(2 * time.Second)
		return out.Summary(), nil
	}
	// Same seeds on both sides: the same events.
	if res.On, err = phase(fmt.Sprintf("audit on, %.0f/s", *rate), on, 300, false); err != nil {
		return err
	}
	if res.Off, err = phase(fmt.Sprintf("audit off, %.0f/s", *rate), off, 300, false); err != nil {
		return err
	}
	rows := []stats.Summary{res.On, res.Off}
	if *users > 0 {
		if res.OnClosed, err = phase(fmt.Sprintf("audit on, %d users", *users), on, 301, true); err != nil {
			return err
		}
		if res.OffClosed, err = phase(fmt.Sprintf("audit off, %d users", *users), off, 301, true); err != nil {
			return err
		}
		res.DropPct = dropPct(res.OnClosed.Throughput(), res.OffClosed.Throughput())
		rows = append(rows, res.OnClosed, res.OffClosed)
	}
	fmt.Fprint(stdout, stats.Text(rows))
	fmt.Fprintf(stdout, "throughput drop with auditing on: %.1f%%\n", res.DropPct)
	if err := writeJSON(c.out, "overhead.json", res); err != nil {
		return err
	}
	if err := writeCSV(c.out, "overhead.csv", summariesCSV(rows)); err != nil {
		return err
	}
	return writeFile(c.out, "overhead.md", summariesMD(rows)+fmt.Sprintf("\nThroughput drop with auditing on (closed model, %d users): %.1f%%\n", *users, res.DropPct))
}

// dropPct is how much lower on is than off, in percent of off.
func dropPct(on, off float64) float64 {
	if off <= 0 {
		return 0
	}
	return 100 * (off - on) / off
}

// BulkResult is what `bulk` writes to bulk.json.
type BulkResult struct {
	Setup    Setup         `json:"setup"`
	Count    int           `json:"count"`
	Users    int           `json:"users"`
	Batch    int           `json:"batch"`
	Summary  stats.Summary `json:"summary"`
	Codes    string        `json:"codes"`
	Records  int           `json:"records"` // events accepted
	Elapsed  time.Duration `json:"elapsed"`
	RecPerS  float64       `json:"records_per_second"`
	Complete bool          `json:"complete"`
}

func cmdBulk(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bulk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, getenv)
	count := fs.Int("count", 1_000_000, "records to send")
	users := fs.Int("users", 100, "concurrent senders")
	maxDur := fs.Duration("max", 30*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tgt, err := c.target()
	if err != nil {
		return err
	}
	gen, err := c.generator(400)
	if err != nil {
		return err
	}
	if *count <= 0 || *count > load.MaxCount {
		return fmt.Errorf("-count %d out of (0, %d]", *count, load.MaxCount)
	}
	requests := (*count + c.batch - 1) / c.batch
	out, err := load.Closed(ctx, tgt, gen, fmt.Sprintf("bulk %d records", *count), *users, *maxDur, requests, nil, c.progress(stderr))
	if err != nil {
		return err
	}
	res := BulkResult{Setup: c.setup(nil), Count: *count, Users: *users, Batch: c.batch, Summary: out.Summary(),
		Codes: codesString(out), Records: out.EventsOK, Elapsed: out.End.Sub(out.Start)}
	if res.Elapsed > 0 {
		res.RecPerS = float64(res.Records) / res.Elapsed.Seconds()
	}
	res.Complete = res.Records >= *count
	rows := []stats.Summary{res.Summary}
	fmt.Fprint(stdout, stats.Text(rows))
	fmt.Fprintf(stdout, "%d records accepted in %s: %.0f records/s (%s)\n", res.Records, res.Elapsed.Round(time.Millisecond), res.RecPerS, res.Codes)
	if err := writeJSON(c.out, "bulk.json", res); err != nil {
		return err
	}
	return writeFile(c.out, "bulk.md", summariesMD(rows)+fmt.Sprintf("\n%s records accepted in %s with %d senders: %.0f records/s.\n",
		strconv.Itoa(res.Records), res.Elapsed.Round(time.Second), *users, res.RecPerS))
}
