package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"threatview/loadtest/procstat"
	"threatview/loadtest/stats"
	"threatview/loadtest/storage"
)

// Reference deployment figures (the page puts ours beside them).
const (
	refRate        = 105.0
	refP95         = 20 * time.Millisecond
	refCores       = 15.0
	refMemGB       = 9.6
	refStorageGB   = 40.0 // Postgres ~23 GB + audit ~17 GB per day at 105 req/s
	goalRate       = 2000.0
	goalCores      = 1.0
	goalMemMiB     = 512.0
	stackServices  = "collector,processor,auditlogger,auditworker,tokens"
	sampleEventMax = 1200
)

func cmdReport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fls := flag.NewFlagSet("report", flag.ContinueOnError)
	fls.SetOutput(stderr)
	in := fls.String("in", defaultOut(getenv), "directory of results (run.json, sweep.json, ...)")
	out := fls.String("o", "docs/performance.md", "page to write")
	title := fls.String("title", "Performance monitoring", "page title")
	if err := fls.Parse(args); err != nil {
		return err
	}
	// Flame graphs are linked when they sit beside the page (scripts/bench.sh
	// renders them there).
	var flames []string
	for _, name := range []string{"flame-collector.svg", "flame-auditlogger.svg", "flame-processor.svg", "flame-auditworker.svg"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(*out), name)); err == nil {
			flames = append(flames, name)
		}
	}
	page, svg, err := buildReport(*in, *title, flames)
	if err != nil {
		return err
	}
	// The page's hand-written sections (measurements no run of this tool
	// takes) survive the rewrite.
	if old, err := os.ReadFile(*out); err == nil {
		page = withKeptSections(page, string(old))
	}
	// The guard's trend (written by `loadtest trend`) closes the page.
	if trend, err := os.ReadFile(filepath.Join(*in, "trend.md")); err == nil {
		page += "\n" + string(trend)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if svg != "" {
		name := strings.TrimSuffix(filepath.Base(*out), ".md") + "-sweep.svg"
		if err := os.WriteFile(filepath.Join(filepath.Dir(*out), name), []byte(svg), 0o644); err != nil {
			return err
		}
		page = strings.ReplaceAll(page, "@SWEEP_SVG@", name)
	}
	if err := os.WriteFile(*out, []byte(page), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

type reportInputs struct {
	run      *RunResult
	sweep    *SweepResult
	sweeps   []SweepResult // repeated sweeps (sweep-1, sweep-2, ...) when there are several
	cpu      *CPUResult
	cpuPrev  *CPUResult // cpu-before.json: the same measurement with an earlier build
	users    *UsersResult
	overhead *OverheadResult
	verify   *VerifyResult
	// sweepChecks are the sweeps' own verifications (sweep-verify.json),
	// one per sweep, in the order of the sweeps.
	sweepChecks []sweepCheck
	storage     *StorageResult
	bulk        *BulkResult
	gobench     string
	ceilings    string
	setup       string
	sample      string
}

func loadOptional[T any](dir, name string) (*T, error) {
	var v T
	if err := readJSON(dir, name, &v); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &v, nil
}

func readInputs(dir string) (reportInputs, error) {
	var in reportInputs
	var err error
	if in.run, err = loadOptional[RunResult](dir, "run.json"); err != nil {
		return in, err
	}
	if in.sweep, err = loadOptional[SweepResult](dir, "sweep.json"); err != nil {
		return in, err
	}
	if in.sweeps, err = readSweeps(dir); err != nil {
		return in, err
	}
	if in.cpu, err = loadOptional[CPUResult](dir, "cpu.json"); err != nil {
		return in, err
	}
	if in.cpuPrev, err = loadOptional[CPUResult](dir, "cpu-before.json"); err != nil {
		return in, err
	}
	if in.users, err = loadOptional[UsersResult](dir, "users.json"); err != nil {
		return in, err
	}
	if in.overhead, err = loadOptional[OverheadResult](dir, "overhead.json"); err != nil {
		return in, err
	}
	if in.verify, err = loadOptional[VerifyResult](dir, "verify.json"); err != nil {
		return in, err
	}
	if in.sweepChecks, err = readSweepChecks(dir, in.sweep, in.sweeps); err != nil {
		return in, err
	}
	if in.storage, err = loadOptional[StorageResult](dir, "storage.json"); err != nil {
		return in, err
	}
	if in.bulk, err = loadOptional[BulkResult](dir, "bulk.json"); err != nil {
		return in, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "gobench.txt")); err == nil {
		in.gobench = string(b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ceilings.txt")); err == nil {
		in.ceilings = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "setup.md")); err == nil {
		in.setup = string(b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sample-event.json")); err == nil {
		in.sample = string(b)
	}
	if in.run == nil {
		return in, errors.New("no run.json: run `loadtest run` first")
	}
	return in, nil
}

// readSweeps reads sweep-1/sweep.json, sweep-2/sweep.json, ... in order
// until one is missing.
func readSweeps(dir string) ([]SweepResult, error) {
	var out []SweepResult
	for i := 1; ; i++ {
		sw, err := loadOptional[SweepResult](filepath.Join(dir, fmt.Sprintf("sweep-%d", i)), "sweep.json")
		if err != nil {
			return nil, err
		}
		if sw == nil {
			return out, nil
		}
		out = append(out, *sw)
	}
}

// sweepCheck is one sweep's verification; V is nil when the sweep was not
// verified.
type sweepCheck struct {
	Label string
	Sweep SweepResult
	V     *VerifyResult
}

// readSweepChecks pairs each sweep already read with its sweep-verify.json:
// sweep-1 ... sweep-n when there were repeated sweeps, else the one sweep
// in dir.
func readSweepChecks(dir string, one *SweepResult, repeated []SweepResult) ([]sweepCheck, error) {
	var out []sweepCheck
	add := func(d, label string, sw SweepResult) error {
		v, err := loadOptional[VerifyResult](d, "sweep-verify.json")
		if err != nil {
			return err
		}
		out = append(out, sweepCheck{Label: label, Sweep: sw, V: v})
		return nil
	}
	for i, sw := range repeated {
		if err := add(filepath.Join(dir, fmt.Sprintf("sweep-%d", i+1)), strconv.Itoa(i+1), sw); err != nil {
			return nil, err
		}
	}
	if len(repeated) == 0 && one != nil {
		if err := add(dir, "the sweep", *one); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sweepChecksMD is the table of the sweeps' verifications.
func sweepChecksMD(cs []sweepCheck) string {
	var b strings.Builder
	b.WriteString("| sweep | rates | requests answered 202 | events accepted | stored exactly once | lost | duplicated | audit rows (outcome 202) | result |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range cs {
		var rates []string
		for _, st := range c.Sweep.Steps {
			rates = append(rates, fmt.Sprintf("%.0f", st.Rate))
		}
		if c.V == nil {
			fmt.Fprintf(&b, "| %s | %s | – | – | – | – | – | – | **not verified** |\n", c.Label, strings.Join(rates, ", "))
			continue
		}
		e := c.V.Events
		audit := "not checked"
		if c.V.Audit != nil {
			audit = fmt.Sprintf("%d of %d", c.V.Audit.Rows, c.V.Audit.Expected)
		}
		result := "ok"
		if !c.V.OK {
			result = "**FAILED**: " + strings.Join(c.V.Problems, "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %s | %s |\n", c.Label, strings.Join(rates, ", "),
			c.V.Manifest.Requests, c.V.Manifest.Events, e.Stored-e.Duplicated, e.Missing, e.Duplicated, audit, result)
	}
	return b.String()
}

// target is one line of the targets table.
type target struct {
	name, reference, goal, ours string
	met                         bool
	known                       bool
	miss                        string
}

func buildReport(dir, title string, flames []string) (string, string, error) {
	in, err := readInputs(dir)
	if err != nil {
		return "", "", err
	}
	r := in.run
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }

	p("# %s\n\n", title)
	p("Generated by `make bench` (scripts/bench.sh and `loadtest report`) on %s. ", r.Setup.Time.Format("2006-01-02 15:04 MST"))
	p("Every figure below comes from that run on this machine; the reference deployment's figures are beside ours.\n\n")

	targets := evalTargets(in)
	p("## Targets\n\n| target | reference | goal | measured | met |\n|---|---|---|---|---|\n")
	for _, t := range targets {
		met := "not measured"
		if t.known {
			met = map[bool]string{true: "yes", false: "**no**"}[t.met]
		}
		p("| %s | %s | %s | %s | %s |\n", t.name, t.reference, t.goal, t.ours, met)
	}
	p("\n")

	p("## Setup\n\n")
	p("- Machine: %d CPU cores (%s), %.1f GiB RAM; the whole stack (PostgreSQL, MariaDB, ActiveMQ, the five services) and the load generator share it.\n",
		r.Setup.CPUs, orUnknown(r.Setup.CPUModel), float64(r.Setup.MemTotal)/(1<<30))
	p("- Load generator: `loadtest` (this repository, `loadtest/`), vegeta %s as a library, %s; open model (requests are sent on schedule whatever the latency, so no coordinated omission).\n", "v12.13.0", r.Setup.GoVersion)
	p("- Target: `POST %s/v1/events` with the demo app's token; one event per request (batch %d); client addresses from the test GeoIP networks sent in `X-Forwarded-For`: %v.\n",
		r.Setup.URL, r.Setup.Batch, r.Setup.ForwardedFor)
	if in.setup != "" {
		p("%s\n", strings.TrimSpace(in.setup))
	}
	p("\n")

	p("## Test run\n\n")
	p("\"Application startup\" events (and a share of other types) from a simulated fleet of 5,000 devices across manufacturers, models, OS versions, app versions and countries, ")
	p("threat lists of 0 to 8 entries and attributes from a few hundred bytes to about 8 KiB; seed %d. ", r.Setup.Seed)
	p("Warm-up %s at %.0f req/s (not counted), then the plan: %s at %.0f req/s. ", human(r.Warmup), r.Rate, human(r.Duration), r.Rate)
	p("The reference ran a 2-minute warm-up and a 10-minute plan at 105 req/s.\n\n")
	if in.sample != "" {
		s := strings.TrimSpace(in.sample)
		if len(s) > sampleEventMax {
			s = s[:sampleEventMax] + " …"
		}
		p("A generated event:\n\n```json\n%s\n```\n\n", s)
	}

	p("## Results\n\n")
	p("%s", summariesMD([]stats.Summary{r.Plan}))
	p("\nReference: %.0f transactions/s, 95th pct %s ms, 0%% errors. Responses during our plan: %s.\n\n", refRate, stats.Ms(refP95), r.Codes)

	if in.sweep != nil {
		s := in.sweep
		p("### Highest rate at p95 ≤ %s ms with 0 errors\n\n", stats.Ms(s.P95Limit))
		p("Rates rise in steps of %s each (after a short unmeasured lead-in); a rate holds when p95 ≤ %s ms, no request fails and the achieved rate is within 5%% of the requested one.\n\n", human(s.Step), stats.Ms(s.P95Limit))
		rows := make([]stats.Summary, len(s.Steps))
		for i, st := range s.Steps {
			rows[i] = st.Summary
			if st.Held {
				rows[i].Label += " (held)"
			} else {
				rows[i].Label += " (missed)"
			}
		}
		p("%s\n", summariesMD(rows))
		if s.Fresh {
			p("The sweep started from a freshly restarted stack (`scripts/stack.sh down`, then `up`) after an uncounted warm-up.\n\n")
		}
		p("**Highest rate that held: %.0f req/s.**\n\n![latency percentiles against rate](@SWEEP_SVG@)\n\n", s.Held)
	}
	if len(in.sweeps) > 1 {
		p("### Repeated sweeps\n\n")
		p("The sweep was run %d times in a row (the table above is the first). %s\n\n", len(in.sweeps), sweepsFreshness(in.sweeps))
		p("%s\n", sweepsMD(in.sweeps))
	}
	if in.users != nil {
		p("### Concurrent users (closed model)\n\n")
		p("Each user sends its next request as soon as the previous one is answered, for %s per level.\n\n", human(in.users.Duration))
		rows := make([]stats.Summary, len(in.users.Levels))
		for i, l := range in.users.Levels {
			rows[i] = l.Summary
		}
		p("%s\n", summariesMD(rows))
	}
	if in.overhead != nil {
		o := in.overhead
		p("### Audit overhead\n\n")
		p("The same load against the collector with auditing on and against a second collector with `AUDITLOGGER_SERVICE_URL` blank (auditing off), each for %s.\n\n", human(o.Duration))
		rows := []stats.Summary{o.On, o.Off}
		if o.Users > 0 {
			rows = append(rows, o.OnClosed, o.OffClosed)
		}
		p("%s\n", summariesMD(rows))
		if o.Users > 0 {
			p("Throughput drop with auditing on (closed model, %d users): **%.1f%%**; p95 at %.0f req/s: %s ms on, %s ms off.\n\n",
				o.Users, o.DropPct, o.Rate, stats.Ms(o.On.P95), stats.Ms(o.Off.P95))
		}
	}

	p("## Resources per service during the plan\n\n")
	p("CPU seconds and peak memory of every process tree of the stack, read from /proc once a second during the %s plan at %.0f req/s (PSS shares pages fairly between processes; RSS double-counts shared memory such as PostgreSQL's shared buffers).\n\n", r.Duration, r.Rate)
	p("%s\n", resourcesMD(r.Resources))
	svcCores, svcRSS, allCores, allPSS := resourceTotals(r.Resources)
	p("Threat View services together: %.3f cores, %s RSS. Whole stack with databases and broker: %.3f cores, %s PSS. The reference requests %.0f cores and %.1f GB for its services.\n\n",
		svcCores, mib(svcRSS), allCores, mib(allPSS), refCores, refMemGB)
	if tp := r.Plan.Throughput(); tp > 0 && allCores > 0 {
		perReq := allCores / tp // core-seconds per request
		p("CPU per request at this rate, whole stack: %.2f ms (services %.2f ms). Idle costs (the broker's and databases' housekeeping) are included, so this overstates the marginal cost; were it all marginal, %d cores would be busy at about %.0f req/s. ",
			1000*perReq, 1000*svcCores/tp, r.Setup.CPUs, float64(r.Setup.CPUs)/perReq)
		p("The load generator itself used %.3f cores.\n\n", generatorCores(r.Resources))
	}
	if len(r.Statements) > 0 {
		p("Costliest PostgreSQL statements during the plan (`pg_stat_statements`):\n\n| statement | calls | total ms | mean ms |\n|---|---:|---:|---:|\n")
		for _, st := range r.Statements {
			p("| `%s` | %d | %.0f | %.3f |\n", strings.ReplaceAll(st.Query, "|", "\\|"), st.Calls, st.TotalMs, st.MeanMs)
		}
		p("\n")
	}

	if in.cpu != nil {
		p("%s", cpuSection(*in.cpu, in.cpuPrev, flames))
	}

	if in.storage != nil {
		sp := in.storage.Projection
		p("## Storage\n\n")
		p("Bytes per stored event in every table, projected at %.0f req/s (1 event per request; month = 30 days). PostgreSQL: growth of `pg_total_relation_size` over all partitions (indexes and TOAST included) while the load stored %d events. MariaDB: the table's average row (`data_length + index_length` after `ANALYZE`, over `count(*)`) times the rows gained per audit row (%d audit rows gained), because InnoDB grows in 1 MiB extents and a short run's growth is mostly rounding.\n\n",
			sp.Rate, sp.EventsAdded, sp.AuditAdded)
		var sb strings.Builder
		sp.WriteMarkdown(&sb)
		p("%s\n", sb.String())
		p("Reference per day at 105 req/s: events ~8 GB, facts ~3 GB, aggregate_staging ~3 GB, facts_to_process ~2 GB, rollups < 1 MB each (Postgres ~23 GB); audit ~17 GB (MariaDB). Sizes here in decimal units (1 GB = 10⁹ bytes). ")
		p("Small runs overstate per-event cost of small tables (a table's first pages) and understate none. The reference's two work-queue tables have no counterpart here: the processor folds the rollups in the transaction that stores the events.\n\n")
	}

	if in.verify != nil {
		p("## Verification\n\n")
		p("After the run: every accepted id (warm-up and plan, %d events, %d requests) looked up in `events.events`, rollups compared with `count(*)` over `events.events` (exact at every commit: the processor folds them in its write transaction), and audit rows counted for the run's window.\n\n",
			in.verify.Manifest.Events, in.verify.Manifest.Requests)
		p("%s\n", verifyMD(*in.verify))
	}
	if len(in.sweepChecks) > 0 {
		if in.verify == nil {
			p("## Verification\n\n")
		}
		p("### The sweeps' accepted events\n\n")
		p("A sweep's top rates are past what the stack holds, where a lost event would show first. After each sweep, once the consumers had caught up (and before the next sweep's restart): every id the sweep's lead-ins and steps got back with a 202 looked up in `events.events` (stored exactly once, with exactly one fact), and the audit rows of its requests counted for the sweep's window. Requests turned away (503, 429) carry no ids and are not counted. The rollups are compared with `count(*)` after the run only (`-rollups=false` here): that comparison reads every stored event.\n\n")
		p("%s\n", sweepChecksMD(in.sweepChecks))
	}

	if in.bulk != nil {
		bk := in.bulk
		p("## Bulk load\n\n")
		p("%d records with %d concurrent senders (the reference loaded 1 million records with 100): %d accepted in %s, **%.0f records/s**.\n\n",
			bk.Count, bk.Users, bk.Records, bk.Elapsed.Round(time.Second), bk.RecPerS)
		p("%s\n", summariesMD([]stats.Summary{bk.Summary}))
	}

	if in.ceilings != "" {
		p("## Ceilings\n\n")
		p("`BenchmarkCopyCeiling` (loadtest/storage) is what PostgreSQL takes in at most: processor-shaped rows COPYed into `events.events` in 2,000-row transactions, with PostgreSQL's CPU per event. ")
		p("\"drain:\" is `TestDrainBesideLiveTraffic` (e2e/fault): the processor stopped while 8 senders queue gzip batches of 250 events of ~500 B, then started while 500 single-event requests a second run beside the drain; its steady rate, CPU per drained event, the live traffic's p95, exactly once and exact rollups. ")
		p("\"backlog capacity:\" is `TestBacklogCapacity` (e2e/fault): a broker of its own with the stack's configuration and a smaller store (1 GB here; 10 GB in the stack), filled with ~1 KB events until it refuses: events held per store, the broker's RSS, the refusal, and the queue drained exactly once; docs/scaling.md compares them. ")
		p("\"cold start:\" is `TestFault_ColdStartValidTokens` (e2e/fault): valid apps arriving at once right after the collector restarted, inside a flood of random tokens.\n\n")
		p("```\n%s\n```\n\n", in.ceilings)
	}

	if in.gobench != "" {
		p("## Go benchmarks\n\n")
		p("`go test -run '^$' -bench . -benchmem` in every module (short benchtime):\n\n")
		p("%s\n", benchTable(in.gobench))
	}

	p("## Where a target is missed\n\n")
	missed := 0
	for _, t := range targets {
		if t.known && !t.met {
			missed++
			p("- **%s**: %s\n", t.name, t.miss)
		}
	}
	if missed == 0 {
		p("Every measured target is met.\n")
	} else {
		p("\nWhat holds it back, from the resource table above: %s. Profile with `pprof` on the services (`/debug/pprof` when enabled), `pg_stat_statements` in PostgreSQL and the broker's queue metrics.\n", topConsumers(r.Resources))
	}
	p("\n## Reproduce\n\n```\nmake up\nmake bench            # Go benchmarks + short load run, writes this page\n. .run/env && go run ./loadtest/cmd/loadtest run   # the reference's 2 min + 10 min plan\n```\n")

	svg := ""
	if in.sweep != nil {
		var sb strings.Builder
		if err := sweepChart(*in.sweep).WriteSVG(&sb); err != nil {
			return "", "", err
		}
		svg = sb.String()
	}
	return b.String(), svg, nil
}

func generatorCores(us []procstat.Usage) float64 {
	for _, u := range us {
		if strings.HasPrefix(u.Name, "loadtest") {
			return u.Cores()
		}
	}
	return 0
}

// human formats a test duration the way the page speaks: "20 s", "2 min".
func human(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "model unknown"
	}
	return s
}

func isService(name string) bool {
	for _, s := range strings.Split(stackServices, ",") {
		if name == s || strings.HasPrefix(name, s+"-") {
			return true
		}
	}
	return false
}

func resourceTotals(us []procstat.Usage) (svcCores float64, svcRSS int64, allCores float64, allPSS int64) {
	for _, u := range us {
		if strings.HasPrefix(u.Name, "loadtest") {
			continue
		}
		allCores += u.Cores()
		pss := u.PeakPSS
		if pss == 0 {
			pss = u.PeakRSS
		}
		allPSS += pss
		if isService(u.Name) {
			svcCores += u.Cores()
			svcRSS += u.PeakRSS
		}
	}
	return
}

func topConsumers(us []procstat.Usage) string {
	s := append([]procstat.Usage{}, us...)
	sort.Slice(s, func(i, j int) bool { return s[i].CPUSeconds > s[j].CPUSeconds })
	var parts []string
	for i := 0; i < len(s) && i < 3; i++ {
		parts = append(parts, fmt.Sprintf("%s %.2f cores", s[i].Name, s[i].Cores()))
	}
	if len(parts) == 0 {
		return "no resource samples"
	}
	return "the largest CPU users were " + strings.Join(parts, ", ")
}

func evalTargets(in reportInputs) []target {
	r := in.run
	var ts []target
	held := r.Plan.Failed == 0 && r.Plan.P95 <= refP95 && r.Plan.Throughput() >= 0.95*r.Rate
	t := target{
		name: fmt.Sprintf("%.0f req/s at p95 ≤ 20 ms, 0 errors (floor)", refRate), reference: "105 req/s, p95 20 ms",
		goal: "same on 2 cores", known: r.Rate >= refRate,
		ours: fmt.Sprintf("%.1f req/s, p95 %s ms, %d failed", r.Plan.Throughput(), stats.Ms(r.Plan.P95), r.Plan.Failed), met: held,
	}
	if !held {
		t.miss = fmt.Sprintf("p95 %s ms against 20 ms (%+.0f%%), %d failed of %d", stats.Ms(r.Plan.P95),
			100*(float64(r.Plan.P95)/float64(refP95)-1), r.Plan.Failed, r.Plan.Samples)
	}
	ts = append(ts, t)

	t = target{name: "≥ 2,000 req/s at p95 ≤ 20 ms, 0 errors, audit on (goal)", reference: "—", goal: "≥ 2,000 req/s"}
	if len(in.sweeps) > 1 {
		t.known, t.met = true, true
		var held []string
		for i, sw := range in.sweeps {
			held = append(held, fmt.Sprintf("%.0f", sw.Held))
			if sw.Held < goalRate {
				t.met = false
				t.miss += fmt.Sprintf("sweep %d held %.0f req/s; ", i+1, sw.Held)
			}
		}
		t.ours = fmt.Sprintf("%s req/s held in %d sweeps", strings.Join(held, ", "), len(in.sweeps))
		t.miss = strings.TrimSuffix(t.miss, "; ")
	} else if in.sweep != nil {
		t.known = true
		t.ours = fmt.Sprintf("%.0f req/s held", in.sweep.Held)
		t.met = in.sweep.Held >= goalRate
		if !t.met {
			t.miss = fmt.Sprintf("the highest rate that held is %.0f req/s, %.0f%% of the goal", in.sweep.Held, 100*in.sweep.Held/goalRate)
			for _, st := range in.sweep.Steps {
				if !st.Held {
					t.miss += fmt.Sprintf("; at %.0f req/s p95 was %s ms with %d failed (%s)", st.Rate, stats.Ms(st.Summary.P95), st.Summary.Failed, st.Codes)
					break
				}
			}
		}
	}
	ts = append(ts, t)

	if in.cpu != nil {
		for _, g := range []struct{ rate, ms float64 }{{1500, 0.5}, {500, 1.0}} {
			t := target{name: fmt.Sprintf("machine CPU per accepted request ≤ %.1f ms at %s req/s", g.ms, thousands(g.rate)),
				reference: "—", goal: fmt.Sprintf("≤ %.1f ms", g.ms)}
			for _, st := range in.cpu.Steps {
				if st.Rate == g.rate && st.Accepted > 0 {
					t.known = true
					t.ours = fmt.Sprintf("%.3f ms (%.3f ms without the load generator)", st.MachineMs(), st.StackMs())
					t.met = st.MachineMs() <= g.ms
					t.miss = fmt.Sprintf("%.3f ms per accepted request at %.0f req/s, %.1f× the goal", st.MachineMs(), g.rate, st.MachineMs()/g.ms)
				}
			}
			ts = append(ts, t)
		}
	}

	svcCores, svcRSS, _, _ := resourceTotals(r.Resources)
	t = target{
		name: "services ≤ 1 core and ≤ 512 MiB RSS at 105 req/s", reference: fmt.Sprintf("%.0f cores, %.1f GB requested", refCores, refMemGB),
		goal: "≤ 1 core, ≤ 512 MiB", known: len(r.Resources) > 1,
		ours: fmt.Sprintf("%.2f cores, %s", svcCores, mib(svcRSS)),
		met:  svcCores <= goalCores && float64(svcRSS) <= goalMemMiB*(1<<20),
	}
	if !t.met {
		t.miss = fmt.Sprintf("%.2f cores (goal 1) and %s RSS (goal 512 MiB)", svcCores, mib(svcRSS))
	}
	ts = append(ts, t)

	t = target{name: "storage per day at 105 req/s ≤ half the reference", reference: "~40 GB/day (23 Postgres + 17 audit)", goal: "≤ 20 GB/day"}
	if in.storage != nil {
		sp := in.storage.Projection
		day := sp.PostgresTotal.PerDay + sp.MariaDBTotal.PerDay
		t.known = sp.EventsAdded > 0
		t.ours = fmt.Sprintf("%s/day (Postgres %s, audit %s)", storage.HumanBytes(day), storage.HumanBytes(sp.PostgresTotal.PerDay), storage.HumanBytes(sp.MariaDBTotal.PerDay))
		t.met = day <= refStorageGB/2*1e9
		if !t.met {
			t.miss = fmt.Sprintf("%s per day, %.0f%% of the reference", storage.HumanBytes(day), 100*day/(refStorageGB*1e9))
		}
	}
	ts = append(ts, t)

	t = target{name: "verify: 0 lost, 0 duplicated, rollups exact, audit complete", reference: "—", goal: "all pass"}
	if in.verify != nil {
		t.known = true
		t.met = in.verify.OK
		t.ours = fmt.Sprintf("%d lost, %d duplicated", in.verify.Events.Missing, in.verify.Events.Duplicated)
		misses := append([]string(nil), in.verify.Problems...)
		if len(in.sweepChecks) > 0 {
			var lost, dup, events int
			for _, c := range in.sweepChecks {
				if c.V == nil {
					misses = append(misses, "sweep "+c.Label+" not verified")
					continue
				}
				lost += c.V.Events.Missing
				dup += c.V.Events.Duplicated
				events += c.V.Manifest.Events
				if !c.V.OK {
					misses = append(misses, "sweep "+c.Label+": "+strings.Join(c.V.Problems, "; "))
				}
			}
			t.ours += fmt.Sprintf("; the sweeps: %d lost, %d duplicated of %d events", lost, dup, events)
		}
		if len(misses) > 0 {
			t.met = false
			t.miss = strings.Join(misses, "; ")
		}
	}
	ts = append(ts, t)

	if in.overhead != nil && in.overhead.Users > 0 {
		ts = append(ts, target{name: "audit overhead (throughput drop)", reference: "—", goal: "reported",
			ours: fmt.Sprintf("%.1f%%", in.overhead.DropPct), known: true, met: true})
	}
	return ts
}

// benchTable turns `go test -bench` output into a Markdown table.
func benchTable(out string) string {
	var b strings.Builder
	b.WriteString("| package | benchmark | iterations | ns/op | B/op | allocs/op | other |\n|---|---|---:|---:|---:|---:|---|\n")
	pkg := ""
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "pkg: ") {
			pkg = strings.TrimPrefix(line, "pkg: ")
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		var nsop, bop, aop string
		var other []string
		for i := 2; i+1 < len(f); i += 2 {
			switch f[i+1] {
			case "ns/op":
				nsop = f[i]
			case "B/op":
				bop = f[i]
			case "allocs/op":
				aop = f[i]
			default:
				other = append(other, f[i]+" "+f[i+1])
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", pkg, f[0], f[1], nsop, bop, aop, strings.Join(other, ", "))
		rows++
	}
	if rows == 0 {
		return "No benchmark results.\n"
	}
	return b.String()
}

// thousands formats a whole number with a comma between thousands.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// sweepsFreshness says whether the sweeps each started from a freshly
// restarted stack.
func sweepsFreshness(sweeps []SweepResult) string {
	fresh := 0
	for _, sw := range sweeps {
		if sw.Fresh {
			fresh++
		}
	}
	switch fresh {
	case len(sweeps):
		return "Each sweep started from a freshly restarted stack (`scripts/stack.sh down`, then `up`) after an uncounted warm-up."
	case 0:
		return "The sweeps ran one after another on the same running stack, warmed once before the first."
	}
	return fmt.Sprintf("%d of the %d sweeps started from a freshly restarted stack (the \"fresh stack\" column); the others ran on the stack as the previous sweep left it.", fresh, len(sweeps))
}

// sweepsMD lists each sweep's highest held rate and its step at the goal.
func sweepsMD(sweeps []SweepResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| sweep | fresh stack | highest rate held | p95 at %s req/s | failed at %s req/s | responses at %s req/s |\n|---:|---|---:|---:|---:|---|\n",
		thousands(goalRate), thousands(goalRate), thousands(goalRate))
	for i, sw := range sweeps {
		p95, failed, codes := "not reached", "–", "–"
		for _, st := range sw.Steps {
			if st.Rate == goalRate {
				p95, failed, codes = stats.Ms(st.Summary.P95)+" ms", fmt.Sprint(st.Summary.Failed), st.Codes
			}
		}
		fmt.Fprintf(&b, "| %d | %s | %.0f req/s | %s | %s | %s |\n", i+1, map[bool]string{true: "yes", false: "no"}[sw.Fresh], sw.Held, p95, failed, codes)
	}
	return b.String()
}

// cpuSection is the page's "CPU per request" section; prev, when not nil,
// is the same measurement taken with an earlier build.
func cpuSection(c CPUResult, prev *CPUResult, flames []string) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	cpus := c.Setup.CPUs
	if len(c.Steps) > 0 && c.Steps[0].CPUs > 0 {
		cpus = c.Steps[0].CPUs
	}
	p("## CPU per request\n\n")
	p("The machine: %d CPU cores (%s). The load generator runs on the same machine, so the whole-machine figures include it; the columns without the generator subtract its own CPU time. ", cpus, orUnknown(c.Setup.CPUModel))
	p("Each rate is run for %s after an unmeasured %s lead-in at that rate. Whole machine: the CPUs times the time between two reads of `/proc/stat`, less the idle and iowait time it counted in between (the kernel keeps those two from timestamps; its user and system fields are tick samples, which for a load of many short wake-ups read up to a fifth off in either direction); per process: CPU time of each process tree from `/proc/PID/stat`. ", human(c.Step), human(c.StepWarmup))
	p("CPU per request is CPU time over requests answered 202, so it includes every idle cost on the machine (anything else running, the broker's and databases' housekeeping).\n\n")
	p("%s", cpuMD(c))
	p("Requests per broker message come from the services' histograms over the same interval (Δsum/Δcount): `collector_message_requests{destination=\"events\"}` for the events queue; ")
	p("each accepted request's audit record goes into the audit queue in the same broker transaction, so the audit queue carries as many messages for accepted requests as the events queue. ")
	p("`collector_message_requests{destination=\"audit\"}` is the collector's batches of rejected requests' audit records to the audit logger, and the audit logger's `auditlogger_posts_per_message` and records per message (`auditlogger_records_published_total` over `auditlogger_broker_messages_total{result=\"ok\"}`) what it puts in one audit-queue message; a figure is left out when its counter did not move.\n\n")
	if prev != nil {
		p("### Before and after\n\n")
		p("The same measurement (`loadtest cpu`) taken with an earlier build (`cpu-before.json`) and with this one (`cpu.json`), at every rate measured in both. ")
		p("The change is that of CPU per accepted request, after against before: negative is cheaper; for requests per events message, positive means fuller messages.\n\n")
		p("%s\n", cpuCompareMD(*prev, c))
	}
	if len(flames) > 0 {
		p("### Flame graphs\n\n")
		p("CPU profiles (`/debug/pprof/profile`, %d s) taken during the %.0f req/s step, rendered by `loadtest flame`: the root at the bottom, each frame as wide as its share of the samples; hover a frame for its name and figures.\n\n", c.ProfileSeconds, c.ProfileRate)
		for _, f := range flames {
			name := strings.TrimSuffix(strings.TrimPrefix(f, "flame-"), ".svg")
			p("- [%s](%s)\n", name, f)
		}
		p("\n")
		for _, f := range flames {
			name := strings.TrimSuffix(strings.TrimPrefix(f, "flame-"), ".svg")
			p("![%s CPU flame graph](%s)\n\n", name, f)
		}
	}
	return b.String()
}

// cpuCompareMD is the before-and-after table of two cpu results: at each
// rate both measured, the whole machine (with and without the load
// generator) and every process, then requests per events message.
func cpuCompareMD(before, after CPUResult) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("- before: %s%s\n- after: %s%s\n\n", labelOr(before.Label), takenOn(before.Setup.Time), labelOr(after.Label), takenOn(after.Setup.Time))
	var common, only []string
	for _, a := range after.Steps {
		if findStep(before.Steps, a.Rate) != nil {
			common = append(common, fmt.Sprintf("%.0f", a.Rate))
		} else {
			only = append(only, fmt.Sprintf("%.0f req/s after", a.Rate))
		}
	}
	for _, s := range before.Steps {
		if findStep(after.Steps, s.Rate) == nil {
			only = append(only, fmt.Sprintf("%.0f req/s before", s.Rate))
		}
	}
	if len(common) == 0 {
		p("No rate was measured in both.\n")
		return b.String()
	}
	p("| rate | figure | cores before | cores after | ms / request before | ms / request after | change |\n|---:|---|---:|---:|---:|---:|---:|\n")
	names := procNames(append(append([]CPUStep{}, after.Steps...), before.Steps...))
	for _, a := range after.Steps {
		bs := findStep(before.Steps, a.Rate)
		if bs == nil {
			continue
		}
		row := func(name, coresB, coresA string, msB, msA float64, okB, okA bool) {
			p("| %.0f/s | %s | %s | %s | %s | %s | %s |\n", a.Rate, name, coresB, coresA, fixedOr(msB, okB, 3), fixedOr(msA, okA, 3), changePct(msB, msA, okB && okA))
		}
		row("whole machine", fmt.Sprintf("%.2f", bs.MachineCores()), fmt.Sprintf("%.2f", a.MachineCores()), bs.MachineMs(), a.MachineMs(), bs.Accepted > 0, a.Accepted > 0)
		row("whole machine without generator", fmt.Sprintf("%.2f", bs.StackCores()), fmt.Sprintf("%.2f", a.StackCores()), bs.StackMs(), a.StackMs(), bs.Accepted > 0, a.Accepted > 0)
		for _, name := range names {
			ub, okB := findUsage(bs.Procs, name)
			ua, okA := findUsage(a.Procs, name)
			row(name, fixedOr(ub.Cores(), okB, 3), fixedOr(ua.Cores(), okA, 3),
				msPerRequest(ub.CPUSeconds, bs.Accepted), msPerRequest(ua.CPUSeconds, a.Accepted), okB && bs.Accepted > 0, okA && a.Accepted > 0)
		}
		mb, okB := eventsPerMessage(bs.Messages)
		ma, okA := eventsPerMessage(a.Messages)
		p("| %.0f/s | requests per events message | – | – | %s | %s | %s |\n", a.Rate, perMessage(mb, okB), perMessage(ma, okA), changePct(mb, ma, okB && okA))
	}
	p("\n")
	if len(only) > 0 {
		p("Measured in one of the two only: %s.\n", strings.Join(only, ", "))
	}
	return b.String()
}

func findStep(steps []CPUStep, rate float64) *CPUStep {
	for i := range steps {
		if steps[i].Rate == rate {
			return &steps[i]
		}
	}
	return nil
}

// eventsPerMessage is the collector's requests per events-queue message.
func eventsPerMessage(ms []MessageRatio) (float64, bool) {
	for _, m := range ms {
		if m.Source == "collector" && m.Queue == "events" && m.What == "requests per message" {
			return m.Per, true
		}
	}
	return 0, false
}

// changePct is after against before in percent; "–" when either is
// unknown or before is zero.
func changePct(before, after float64, ok bool) string {
	if !ok || before == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f%%", 100*(after/before-1))
}

func fixedOr(v float64, ok bool, prec int) string {
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func perMessage(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f per message", v)
}

func labelOr(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no label)"
	}
	return s
}

func takenOn(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " (measured " + t.Format("2006-01-02 15:04 MST") + ")"
}

// keptMarker, on the line after a "## " heading of the page, marks a
// section written by hand: report carries it over when it rewrites the page.
const keptMarker = "<!-- written by hand: loadtest report keeps this section -->"

// withKeptSections inserts old's hand-written sections (a "## " heading
// followed by keptMarker, up to the next "## " heading), in their order,
// before page's "## Reproduce" (at its end when it has none).
func withKeptSections(page, old string) string {
	var kept []string
	for _, sec := range strings.SplitAfter(old, "\n## ")[1:] {
		sec = strings.TrimSuffix(sec, "## ")
		title, body, _ := strings.Cut(sec, "\n")
		if strings.HasPrefix(body, keptMarker) {
			kept = append(kept, "## "+title+"\n"+strings.TrimRight(body, "\n")+"\n\n")
		}
	}
	if len(kept) == 0 {
		return page
	}
	at := strings.Index(page, "\n## Reproduce")
	if at < 0 {
		return strings.TrimRight(page, "\n") + "\n\n" + strings.Join(kept, "")
	}
	return page[:at+1] + strings.Join(kept, "") + page[at+1:]
}
