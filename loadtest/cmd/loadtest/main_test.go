package main

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"threatview/loadtest/load"
	"threatview/loadtest/procstat"
	"threatview/loadtest/stats"
	"threatview/loadtest/storage"
	"threatview/loadtest/verify"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRun_Commands(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		args []string
		want error
	}{
		{"NoCommand", nil, nil},
		{"Unknown", []string{"frobnicate"}, nil},
		{"NotLoopback", []string{"run", "-url", "http://192.0.2.7:8080", "-token", "t"}, load.ErrNotLoopback},
		{"SweepNotLoopback", []string{"sweep", "-url", "http://example.com", "-token", "t"}, load.ErrNotLoopback},
		{"OverheadOffNotLoopback", []string{"overhead", "-token", "t", "-off-url", "http://10.1.1.1:8090"}, load.ErrNotLoopback},
		{"NoToken", []string{"users"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(ctx, tt.args, env(nil), io.Discard, io.Discard)
			if err == nil {
				t.Fatalf("run(%q) = nil, want an error", tt.args)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("run(%q) = %v, want %v", tt.args, err, tt.want)
			}
		})
	}
}

func TestSample_Output(t *testing.T) {
	var b strings.Builder
	if err := run(context.Background(), []string{"sample", "-n", "3", "-app", "my-app"}, env(nil), &b, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"id":"my-app"`) {
		t.Errorf("sample = %q", b.String())
	}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	plan := stats.Summary{Label: "Application startup", Samples: 6300, Average: ms(3), Min: ms(1), Max: ms(40), Median: ms(2.5), P90: ms(4), P95: ms(5), P99: ms(9), Span: 60 * time.Second}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(writeJSON(dir, "run.json", RunResult{
		Setup: Setup{Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), URL: "http://127.0.0.1:8080", CPUs: 2, Batch: 1, Seed: 1},
		Label: plan.Label, Rate: 105, Warmup: 20 * time.Second, Duration: time.Minute, Plan: plan, Codes: "6300×202",
		Resources: []procstat.Usage{
			{Name: "collector", CPUSeconds: 6, Wall: time.Minute, PeakRSS: 40 << 20},
			{Name: "processor", CPUSeconds: 3, Wall: time.Minute, PeakRSS: 30 << 20},
			{Name: "postgres", CPUSeconds: 12, Wall: time.Minute, PeakRSS: 300 << 20, PeakPSS: 120 << 20},
			{Name: "loadtest (generator)", CPUSeconds: 2, Wall: time.Minute, PeakRSS: 20 << 20},
		},
	}))
	steps := []SweepStep{
		{Rate: 105, Summary: stats.Summary{Label: "105/s", Samples: 100, P95: ms(5), Span: time.Second}, Held: true},
		{Rate: 1000, Summary: stats.Summary{Label: "1000/s", Samples: 1000, P95: ms(12), Span: time.Second}, Held: true},
		{Rate: 2000, Summary: stats.Summary{Label: "2000/s", Samples: 2000, Failed: 3, P95: ms(45), Span: time.Second}, Held: false, Codes: "3×503"},
	}
	must(writeJSON(dir, "sweep.json", SweepResult{Step: 10 * time.Second, P95Limit: 20 * time.Millisecond, Steps: steps, Held: 1000}))
	must(writeJSON(dir, "overhead.json", OverheadResult{Rate: 500, Users: 50, On: plan, Off: plan,
		OnClosed: stats.Summary{Samples: 900, Span: time.Second}, OffClosed: stats.Summary{Samples: 1000, Span: time.Second}, DropPct: 10}))
	must(writeJSON(dir, "verify.json", VerifyResult{Events: verify.Events{Accepted: 8400, Distinct: 8400, Stored: 8400}, OK: true}))
	p := storage.Project(storage.Snapshot{}, storage.Snapshot{Events: 1000, AuditRows: 1000, Tables: []storage.Table{
		{DB: "postgres", Name: "events.events", Rows: 1000, Bytes: 600_000},
		{DB: "mariadb", Name: "audit.audit_events", Rows: 1000, Bytes: 400_000},
	}}, 105)
	must(writeJSON(dir, "storage.json", StorageResult{Rate: 105, Projection: p}))
	must(os.WriteFile(filepath.Join(dir, "ceilings.txt"), []byte("BenchmarkCopyCeiling/payload=260-2   1   2000000000 ns/op   31000 events/s   52.0 pg-cpu-µs/event\n"+
		"cold start: 40 valid apps, all 202 in 1.20 s\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "gobench.txt"), []byte("goos: linux\npkg: threatview/loadtest/stats\nBenchmarkSummarize-2   	     100	  5000000 ns/op	  507904 B/op	       1 allocs/op\nPASS\n"), 0o644))

	// 1,500 req/s for 20 s: 30,000 accepted; 16 CPU s = 0.533 ms each (goal 0.5, missed),
	// 4 of them the generator's; 500 req/s: 10,000 accepted, 6 CPU s = 0.6 ms (goal 1.0, met).
	must(writeJSON(dir, "cpu.json", CPUResult{Setup: Setup{CPUs: 2, CPUModel: "Test CPU"}, Step: 20 * time.Second, StepWarmup: 5 * time.Second, ProfileRate: 1500, ProfileSeconds: 15,
		Steps: []CPUStep{
			{Rate: 500, Accepted: 10000, Wall: 20 * time.Second, CPUs: 2, MachineCPU: 6, GeneratorCPU: 1, Held: true, Codes: "10000×202",
				Summary: stats.Summary{Label: "500/s", Samples: 10000, P95: ms(4), Span: 20 * time.Second}},
			{Rate: 1500, Accepted: 30000, Wall: 20 * time.Second, CPUs: 2, MachineCPU: 16, GeneratorCPU: 4, Held: true, Codes: "30000×202",
				Summary:  stats.Summary{Label: "1500/s", Samples: 30000, P95: ms(8), Span: 20 * time.Second},
				Procs:    []procstat.Usage{{Name: "collector", CPUSeconds: 6, Wall: 20 * time.Second}},
				Messages: []MessageRatio{{Source: "collector", Queue: "events", What: "requests per message", Num: 30000, Messages: 2500, Per: 12}}},
		}}))

	// An earlier build measured at 1,500 req/s: 20 CPU s, 0.667 ms each.
	must(writeJSON(dir, "cpu-before.json", CPUResult{Label: "before the change", Steps: []CPUStep{
		{Rate: 1500, Accepted: 30000, Wall: 20 * time.Second, CPUs: 2, MachineCPU: 20, GeneratorCPU: 4}}}))

	out := filepath.Join(t.TempDir(), "docs", "performance.md")
	if d := os.Getenv("LOADTEST_REPORT_DIR"); d != "" {
		out = filepath.Join(d, "performance.md")
	}
	must(os.MkdirAll(filepath.Dir(out), 0o755))
	must(os.WriteFile(filepath.Join(filepath.Dir(out), "flame-collector.svg"), []byte("<svg/>"), 0o644))
	must(os.WriteFile(filepath.Join(filepath.Dir(out), "flame-processor.svg"), []byte("<svg/>"), 0o644))
	// The page as an earlier run left it, with a section written by hand.
	must(os.WriteFile(out, []byte("# Old\n\n## Results\n\nstale\n\n## Analyst pages at scale\n"+keptMarker+"\n\nHome p95 143 ms\n\n## Reproduce\n\nx\n"), 0o644))
	if err := run(context.Background(), []string{"report", "-in", dir, "-o", out}, env(nil), io.Discard, io.Discard); err != nil {
		t.Fatalf("report = %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		"## Analyst pages at scale\n" + keptMarker + "\n\nHome p95 143 ms",
		"## Setup", "## Test run", "## Results", "## Resources per service", "## Storage", "## Verification", "## Go benchmarks",
		"## Ceilings", "31000 events/s   52.0 pg-cpu-µs/event", "cold start: 40 valid apps, all 202 in 1.20 s",
		"| Application startup | 6300 | 0 | 0.00% |",
		"Highest rate that held: 1000 req/s",
		"![latency percentiles against rate](performance-sweep.svg)",
		"| threatview/loadtest/stats | BenchmarkSummarize-2 | 100 | 5000000 | 507904 | 1 |",
		// 2,000 req/s goal missed: the page says by how much.
		"the highest rate that held is 1000 req/s, 50% of the goal; at 2000 req/s p95 was 45.00 ms with 3 failed (3×503)",
		// services: collector + processor = 0.15 cores, 70 MiB RSS; postgres is not a service.
		"0.15 cores, 70.0 MiB",
		// storage: (600 + 400) B × 105 × 86400 = 9.1 GB per day, under half of 40 GB.
		"9.1 GB/day",
		"Throughput drop with auditing on (closed model, 50 users): **10.0%**",
		"## CPU per request", "2 CPU cores (Test CPU)",
		"| 1500/s | 1500.0/s | 8.00 | 30000 | 30000×202 | 0.80 of 2 | 0.533 | 0.60 | 0.400 |",
		"| collector | – | – | 0.300 | 0.200 |",
		"| 1500/s | collector | events | requests per message | 30000 | 2500 | 12.00 |",
		"| machine CPU per accepted request ≤ 0.5 ms at 1,500 req/s | — | ≤ 0.5 ms | 0.533 ms (0.400 ms without the load generator) | **no** |",
		"| machine CPU per accepted request ≤ 1.0 ms at 500 req/s | — | ≤ 1.0 ms | 0.600 ms (0.500 ms without the load generator) | yes |",
		"![collector CPU flame graph](flame-collector.svg)",
		"![processor CPU flame graph](flame-processor.svg)",
		"### Before and after", "- before: before the change\n- after: (no label)",
		"| 1500/s | whole machine | 1.00 | 0.80 | 0.667 | 0.533 | -20.0% |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "Repeated sweeps") {
		t.Error("page lists repeated sweeps with only one")
	}
	if strings.Contains(page, "flame-auditlogger.svg") {
		t.Error("page links a flame graph that is not there")
	}
	if strings.Contains(page, "@SWEEP_SVG@") {
		t.Error("placeholder left in page")
	}
	svg, err := os.ReadFile(filepath.Join(filepath.Dir(out), "performance-sweep.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("sweep SVG: %v", err)
		}
	}
}

func TestReport_RepeatedSweeps(t *testing.T) {
	dir := t.TempDir()
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	plan := stats.Summary{Label: "Application startup", Samples: 6300, P95: ms(5), Span: 60 * time.Second}
	if err := writeJSON(dir, "run.json", RunResult{Rate: 105, Duration: time.Minute, Plan: plan}); err != nil {
		t.Fatal(err)
	}
	// Three sweeps: the second missed 2,000 req/s, the third did not reach it.
	for i, held := range []float64{2000, 1500, 1000} {
		st := []SweepStep{{Rate: 1000, Summary: stats.Summary{Label: "1000/s", Samples: 1000, P95: ms(3), Span: time.Second}, Held: true, Codes: "1000×202"}}
		if held >= 1500 {
			st = append(st, SweepStep{Rate: 2000, Summary: stats.Summary{Label: "2000/s", Samples: 2000, Failed: 2, P95: ms(9), Span: time.Second}, Held: held == 2000, Codes: "1998×202, 2×503"})
		}
		sw := SweepResult{Step: 10 * time.Second, P95Limit: 20 * time.Millisecond, Steps: st, Held: held, Fresh: true}
		if err := writeJSON(filepath.Join(dir, fmt.Sprintf("sweep-%d", i+1)), "sweep.json", sw); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := writeJSON(dir, "sweep.json", sw); err != nil {
				t.Fatal(err)
			}
		}
		// Sweep 1 verified clean, sweep 2 lost an event, sweep 3 was not verified.
		m := verify.Manifest{Requests: 3000 - 2*i, Events: 3000 - 2*i, Audited: true}
		v := VerifyResult{Manifest: m, OK: true,
			Events: verify.Events{Accepted: m.Events, Distinct: m.Events, Stored: m.Events},
			Audit:  &verify.Audit{Expected: m.Requests, Rows: m.Requests}}
		if i == 1 {
			v.OK, v.Events.Stored, v.Events.Missing = false, m.Events-1, 1
			v.Problems = []string{"1 accepted events lost"}
		}
		if i < 2 {
			if err := writeJSON(filepath.Join(dir, fmt.Sprintf("sweep-%d", i+1)), "sweep-verify.json", v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := writeJSON(dir, "verify.json", VerifyResult{OK: true}); err != nil {
		t.Fatal(err)
	}
	page, _, err := buildReport(dir, "T", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### The sweeps' accepted events",
		"| 1 | 1000, 2000 | 3000 | 3000 | 3000 | 0 | 0 | 3000 of 3000 | ok |",
		"| 2 | 1000, 2000 | 2998 | 2998 | 2997 | 1 | 0 | 2998 of 2998 | **FAILED**: 1 accepted events lost |",
		"| 3 | 1000 | – | – | – | – | – | – | **not verified** |",
		"0 lost, 0 duplicated; the sweeps: 1 lost, 0 duplicated of 5998 events | **no** |",
		"sweep 2: 1 accepted events lost; sweep 3 not verified",
		"### Repeated sweeps", "The sweep was run 3 times",
		"| 2 | yes | 1500 req/s | 9.00 ms | 2 | 1998×202, 2×503 |",
		"| 3 | yes | 1000 req/s | not reached | – | – |",
		"Each sweep started from a freshly restarted stack",
		"The sweep started from a freshly restarted stack", // the first, on top
		"| 2000, 1500, 1000 req/s held in 3 sweeps | **no** |", "sweep 2 held 1500 req/s; sweep 3 held 1000 req/s",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "## CPU per request") {
		t.Error("page has a CPU section without cpu.json")
	}
}

func TestSweepsFreshness(t *testing.T) {
	tests := []struct {
		name  string
		fresh []bool
		want  string
	}{
		{"AllFresh", []bool{true, true}, "Each sweep started from a freshly restarted stack"},
		{"NoneFresh", []bool{false, false, false}, "on the same running stack"},
		{"Mixed", []bool{false, true, true}, "2 of the 3 sweeps started from a freshly restarted stack"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sws []SweepResult
			for _, f := range tt.fresh {
				sws = append(sws, SweepResult{Fresh: f})
			}
			if got := sweepsFreshness(sws); !strings.Contains(got, tt.want) {
				t.Errorf("sweepsFreshness(%v) = %q, want it to contain %q", tt.fresh, got, tt.want)
			}
		})
	}
}

func TestCPUCompareMD(t *testing.T) {
	w := 20 * time.Second
	events := func(per float64) []MessageRatio {
		return []MessageRatio{{Source: "collector", Queue: "events", What: "requests per message", Num: 30000, Messages: 30000 / per, Per: per}}
	}
	// 1,500 req/s in both, 30,000 accepted over 20 s. Before: 24 CPU s on
	// the machine (6 the generator's), collector 9 s, processor 3 s, 10
	// requests per message. After: 18 CPU s (6 the generator's), collector
	// 6 s, auditlogger 2 s, 15 requests per message.
	before := CPUResult{Label: "old build", Setup: Setup{Time: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}, Steps: []CPUStep{
		{Rate: 500, Accepted: 10000, Wall: w, MachineCPU: 6},
		{Rate: 1500, Accepted: 30000, Wall: w, MachineCPU: 24, GeneratorCPU: 6, Messages: events(10),
			Procs: []procstat.Usage{{Name: "collector", CPUSeconds: 9, Wall: w}, {Name: "processor", CPUSeconds: 3, Wall: w}}},
	}}
	after := CPUResult{Steps: []CPUStep{
		{Rate: 1500, Accepted: 30000, Wall: w, MachineCPU: 18, GeneratorCPU: 6, Messages: events(15),
			Procs: []procstat.Usage{{Name: "collector", CPUSeconds: 6, Wall: w}, {Name: "auditlogger", CPUSeconds: 2, Wall: w}}},
		{Rate: 2000, Accepted: 40000, Wall: w, MachineCPU: 30},
	}}
	md := cpuCompareMD(before, after)
	for _, want := range []string{
		"- before: old build (measured 2026-11-30 09:00 UTC)\n- after: (no label)\n",
		"| 1500/s | whole machine | 1.20 | 0.90 | 0.800 | 0.600 | -25.0% |",
		"| 1500/s | whole machine without generator | 0.90 | 0.60 | 0.600 | 0.400 | -33.3% |",
		"| 1500/s | collector | 0.450 | 0.300 | 0.300 | 0.200 | -33.3% |",
		"| 1500/s | auditlogger | – | 0.100 | – | 0.067 | – |",
		"| 1500/s | processor | 0.150 | – | 0.100 | – | – |",
		"| 1500/s | requests per events message | – | – | 10.00 per message | 15.00 per message | +50.0% |",
		"Measured in one of the two only: 2000 req/s after, 500 req/s before.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("cpuCompareMD lacks %q:\n%s", want, md)
		}
	}
	// One table row per figure at the one common rate: two machine rows,
	// three processes, one message row.
	if n := strings.Count(md, "\n| 1500/s |"); n != 6 {
		t.Errorf("cpuCompareMD has %d rows at 1500/s, want 6:\n%s", n, md)
	}
	if strings.Contains(md, "| 500/s |") || strings.Contains(md, "| 2000/s |") {
		t.Errorf("cpuCompareMD has a row for a rate measured once:\n%s", md)
	}
	if md := cpuCompareMD(CPUResult{Steps: []CPUStep{{Rate: 500}}}, after); !strings.Contains(md, "No rate was measured in both.") {
		t.Errorf("cpuCompareMD without a common rate = %q", md)
	}
}

func TestChangePct(t *testing.T) {
	tests := []struct {
		before, after float64
		ok            bool
		want          string
	}{
		{0.8, 0.6, true, "-25.0%"},
		{10, 15, true, "+50.0%"},
		{1, 1, true, "+0.0%"},
		{0, 1, true, "–"},
		{1, 2, false, "–"},
	}
	for _, tt := range tests {
		if got := changePct(tt.before, tt.after, tt.ok); got != tt.want {
			t.Errorf("changePct(%v, %v, %v) = %q, want %q", tt.before, tt.after, tt.ok, got, tt.want)
		}
	}
}

func TestReport_NeedsRun(t *testing.T) {
	err := run(context.Background(), []string{"report", "-in", t.TempDir(), "-o", filepath.Join(t.TempDir(), "p.md")}, env(nil), io.Discard, io.Discard)
	if err == nil {
		t.Error("report without run.json = nil error")
	}
}

func TestDropPct(t *testing.T) {
	tests := []struct{ on, off, want float64 }{{900, 1000, 10}, {1000, 1000, 0}, {5, 0, 0}, {1100, 1000, -10}}
	for _, tt := range tests {
		if got := dropPct(tt.on, tt.off); got != tt.want {
			t.Errorf("dropPct(%v, %v) = %v, want %v", tt.on, tt.off, got, tt.want)
		}
	}
}

func TestTopStatements(t *testing.T) {
	before := map[stmtKey]stmtRow{{1, "INSERT  INTO a"}: {calls: 10, totalMs: 5}, {2, "SELECT 1"}: {calls: 3, totalMs: 1}}
	after := map[stmtKey]stmtRow{
		{1, "INSERT  INTO a"}: {calls: 110, totalMs: 105}, // +100 calls, +100 ms
		{2, "SELECT 1"}:       {calls: 3, totalMs: 1},     // idle: left out
		{3, "COPY b"}:         {calls: 4, totalMs: 400},   // new
		{4, "UPDATE c"}:       {calls: 50, totalMs: 20},
	}
	got := topStatements(before, after, 2)
	want := []Statement{{Query: "COPY b", Calls: 4, TotalMs: 400, MeanMs: 100}, {Query: "INSERT INTO a", Calls: 100, TotalMs: 100, MeanMs: 1}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("topStatements = %+v, want %+v", got, want)
	}
	if topStatements(before, nil, 5) != nil {
		t.Error("topStatements without a reading after the plan should be nil")
	}
}

func TestHuman(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{{20 * time.Second, "20 s"}, {2 * time.Minute, "2 min"}, {90 * time.Second, "90 s"}, {1500 * time.Millisecond, "1.5s"}}
	for _, tt := range tests {
		if got := human(tt.d); got != tt.want {
			t.Errorf("human(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
