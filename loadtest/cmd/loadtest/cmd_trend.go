package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// TrendRecord is one `make bench` run as the history keeps it.
type TrendRecord struct {
	Date  time.Time `json:"date"`
	Label string    `json:"label"`
	// Held is the highest rate held (p95 within the limit, nothing failed)
	// by each sweep of the run.
	Held []float64 `json:"held"`
	// P95At105 is each sweep's p95 at the reference's 105 req/s.
	P95At105 []time.Duration `json:"p95_at_105"`
	// Machine describes the box (CPUs, model) the run was taken on.
	Machine string `json:"machine"`
}

// Trend is the history file (docs/bench/history.json).
type Trend struct {
	Runs []TrendRecord `json:"runs"`
}

// errTrend is a broken promise or a regression: `make bench` fails on it.
var errTrend = errors.New("performance guard failed")

const referenceRate = 105

// cmdTrend reads the sweeps of a bench run, compares them with the recorded
// history, appends the run and writes trend.md beside the results. It
// fails when 105 req/s was over the p95 limit in any sweep, or when the best
// rate held fell below the previous run's by more than the noise: the
// larger of this run's spread between sweeps, the spread of the last five
// recorded runs, and one step of the sweep's rate grid.
func cmdTrend(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", defaultOut(getenv), "directory of results holding sweep.json (and sweep-N/sweep.json)")
	hist := fs.String("history", "docs/bench/history.json", "history of recorded runs (read, then appended to)")
	label := fs.String("label", "this tree", "names this run in the history")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sweeps, err := allSweeps(*in)
	if err != nil {
		return err
	}
	var h Trend
	if err := readJSON(filepath.Dir(*hist), filepath.Base(*hist), &h); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", *hist, err)
	}
	rec := TrendRecord{Date: time.Now().UTC().Truncate(time.Second), Label: *label, Machine: machine()}
	grid := 0.0
	for _, s := range sweeps {
		rec.Held = append(rec.Held, s.Held)
		for i, st := range s.Steps {
			if st.Rate == referenceRate {
				rec.P95At105 = append(rec.P95At105, st.Summary.P95)
			}
			if i > 0 && s.Steps[i-1].Rate == s.Held {
				grid = max(grid, st.Rate-s.Held)
			}
		}
	}
	problems := judgeTrend(rec, h.Runs, grid)
	h.Runs = append(h.Runs, rec)
	if err := writeJSON(filepath.Dir(*hist), filepath.Base(*hist), h); err != nil {
		return err
	}
	page := trendPage(h.Runs, problems)
	if err := writeFile(*in, "trend.md", page); err != nil {
		return err
	}
	fmt.Fprint(stdout, page)
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errTrend, strings.Join(problems, "; "))
	}
	return nil
}

// allSweeps returns every sweep of a run: sweep-1, sweep-2, ... when there
// are several, else sweep.json.
func allSweeps(dir string) ([]SweepResult, error) {
	out, err := readSweeps(dir)
	if err != nil || len(out) > 0 {
		return out, err
	}
	var s SweepResult
	if err := readJSON(dir, "sweep.json", &s); err != nil {
		return nil, fmt.Errorf("no sweep in %s: %w", dir, err)
	}
	return []SweepResult{s}, nil
}

// judgeTrend lists how rec breaks the promise or regresses against the
// previous run; grid is the step of the sweep's rates above the held one.
func judgeTrend(rec TrendRecord, prev []TrendRecord, grid float64) []string {
	var problems []string
	for i, p := range rec.P95At105 {
		if p > 20*time.Millisecond {
			problems = append(problems, fmt.Sprintf("sweep %d: 105 req/s answered at p95 %s, over 20ms", i+1, p))
		}
	}
	if len(rec.P95At105) == 0 {
		problems = append(problems, "no sweep measured 105 req/s")
	}
	if len(prev) == 0 || len(rec.Held) == 0 {
		return problems
	}
	last := slices.Max(prev[len(prev)-1].Held)
	noise := max(spread(rec.Held), grid)
	var recent []float64
	for _, r := range prev[max(0, len(prev)-5):] {
		recent = append(recent, slices.Max(r.Held))
	}
	noise = max(noise, spread(recent))
	if best := slices.Max(rec.Held); best < last-noise {
		problems = append(problems, fmt.Sprintf("highest rate held %.0f req/s, below the previous run's %.0f by more than the noise (%.0f req/s)", best, last, noise))
	}
	return problems
}

func spread(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v) - slices.Min(v)
}

func trendPage(runs []TrendRecord, problems []string) string {
	var b strings.Builder
	b.WriteString("## Trend over the recorded runs\n\n")
	b.WriteString("Every `make bench` run appends its sweeps to `docs/bench/history.json`; the run fails when 105 req/s is over 20 ms p95 in any sweep or the highest rate held falls below the previous run's by more than the noise (the larger of this run's spread between sweeps, the last five runs' spread, and one step of the rate grid).\n\n")
	b.WriteString("| date | build | machine | highest rate held (each sweep) | p95 at 105 req/s (each sweep) |\n|---|---|---|---|---|\n")
	for _, r := range runs {
		held := make([]string, len(r.Held))
		for i, v := range r.Held {
			held[i] = fmt.Sprintf("%.0f", v)
		}
		p95 := make([]string, len(r.P95At105))
		for i, v := range r.P95At105 {
			p95[i] = fmt.Sprintf("%.1f ms", float64(v)/float64(time.Millisecond))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Date.Format("2006-01-02 15:04"), r.Label, r.Machine, strings.Join(held, ", "), strings.Join(p95, ", "))
	}
	if len(problems) > 0 {
		b.WriteString("\n**This run failed the guard:**\n\n")
		for _, p := range problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	return b.String()
}

// machine names the box: CPU count and model from /proc/cpuinfo.
func machine() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	n, model := 0, ""
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			n++
		case "model name":
			model = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("%d vCPU %s", n, model)
}
