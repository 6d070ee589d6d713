package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"threatview/loadtest/load"
	"threatview/loadtest/procstat"
	"threatview/loadtest/stats"
)

// CPUResult is what `cpu` writes to cpu.json.
type CPUResult struct {
	Setup Setup `json:"setup"`
	// Label names the setup measured (free text, e.g. the build), for the
	// report's before-and-after comparison.
	Label          string        `json:"label,omitempty"`
	Step           time.Duration `json:"step"`
	StepWarmup     time.Duration `json:"step_warmup"`
	P95Limit       time.Duration `json:"p95_limit"`
	ProfileRate    float64       `json:"profile_rate"`
	ProfileSeconds int           `json:"profile_seconds"`
	// Steps holds one run per rate: with Repeat > 1 the median run by CPU
	// per request, and every run is in Runs.
	Steps  []CPUStep `json:"steps"`
	Repeat int       `json:"repeat,omitempty"`
	Runs   []CPUStep `json:"runs,omitempty"`
}

// CPUStep is what one rate cost.
type CPUStep struct {
	Rate     float64       `json:"rate"`
	Run      int           `json:"run,omitempty"` // 1-based round, with -repeat
	Summary  stats.Summary `json:"summary"`
	Codes    string        `json:"codes"`
	Accepted int           `json:"accepted"` // 202 responses
	Held     bool          `json:"held"`
	// Wall is the interval the machine's CPU was read over (the load plus
	// the reads at its edges).
	Wall time.Duration `json:"wall"`
	CPUs int           `json:"cpus"`
	// MachineCPU is the whole machine's busy CPU seconds over Wall: the
	// CPUs times the time between the two reads of /proc/stat, less the
	// idle and iowait time the kernel counted in between (machineBusy).
	MachineCPU float64 `json:"machine_cpu_seconds"`
	// MachineCPUSampled is the sum of the busy fields of /proc/stat (user,
	// nice, system, irq, softirq, steal) over the same interval. Those
	// fields are tick samples, and for a load of many short wake-ups they
	// can read a fifth below the processes' own CPU time; kept to compare.
	MachineCPUSampled float64 `json:"machine_cpu_sampled_seconds,omitempty"`
	// GeneratorCPU is the load generator's share of MachineCPU.
	GeneratorCPU float64           `json:"generator_cpu_seconds"`
	Procs        []procstat.Usage  `json:"procs"`
	Messages     []MessageRatio    `json:"messages,omitempty"`
	Profiles     map[string]string `json:"profiles,omitempty"` // name -> file in the output directory
	Warnings     []string          `json:"warnings,omitempty"`
}

// MessageRatio is how many things one broker message (or one batch)
// carried during a step: ΔNum/ΔDen of two counters.
type MessageRatio struct {
	Source   string  `json:"source"` // metrics endpoint name
	Queue    string  `json:"queue"`
	What     string  `json:"what"`
	Num      float64 `json:"num"`
	Messages float64 `json:"messages"`
	Per      float64 `json:"per_message"`
}

// Achieved is the rate of responses during the step.
func (s CPUStep) Achieved() float64 { return s.Summary.Throughput() }

// MachineCores is the average number of the machine's cores busy.
func (s CPUStep) MachineCores() float64 { return perSecond(s.MachineCPU, s.Wall) }

// MachineMs is the machine's CPU milliseconds per accepted request.
func (s CPUStep) MachineMs() float64 { return msPerRequest(s.MachineCPU, s.Accepted) }

// OtherCPU is the machine's CPU seconds outside the sampled process trees
// (the kernel's own threads, anything else running).
func (s CPUStep) OtherCPU() float64 {
	other := s.MachineCPU
	for _, u := range s.Procs {
		other -= u.CPUSeconds
	}
	return other
}

// StackCores is MachineCores without the load generator.
func (s CPUStep) StackCores() float64 { return perSecond(s.MachineCPU-s.GeneratorCPU, s.Wall) }

// StackMs is MachineMs without the load generator.
func (s CPUStep) StackMs() float64 { return msPerRequest(s.MachineCPU-s.GeneratorCPU, s.Accepted) }

func perSecond(cpu float64, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu / wall.Seconds()
}

// msPerRequest is CPU milliseconds per request; 0 when nothing was accepted.
func msPerRequest(cpuSeconds float64, accepted int) float64 {
	if accepted <= 0 {
		return 0
	}
	return 1000 * cpuSeconds / float64(accepted)
}

func cmdCPU(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cpu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, getenv)
	rates := fs.String("rates", "500,1500,2000", "rates to measure, req/s")
	step := fs.Duration("step", 20*time.Second, "measured length of each rate")
	warm := fs.Duration("step-warmup", 5*time.Second, "unmeasured lead-in at each rate")
	pause := fs.Duration("pause", 3*time.Second, "pause between rates (lets queues drain)")
	limit := fs.Duration("p95", 20*time.Millisecond, "p95 limit for a rate to count as held")
	pidDir := fs.String("pids", envPidDir(getenv), "directory of NAME.pid files of the stack to sample (empty: none)")
	metrics := fs.String("metrics", "", "NAME=URL,... Prometheus endpoints read before and after each rate (default collector=URL/metrics,auditlogger=$THREATVIEW_AUDIT_URL/metrics; none: skip)")
	profRate := fs.Float64("profile-rate", 1500, "rate at which to take CPU profiles (0: none)")
	profiles := fs.String("profile", "", "NAME=BASEURL,... services to profile through /debug/pprof (default collector=URL,auditlogger=$THREATVIEW_AUDIT_URL; none: skip)")
	profSecs := fs.Int("profile-seconds", 15, "length of each CPU profile (at most -step)")
	label := fs.String("label", "", "free text naming this setup, e.g. the build (the report's before-and-after table prints it)")
	sweepFile := fs.String("sweep", "", "sweep.json whose highest held rate is measured too (skipped when missing)")
	repeat := fs.Int("repeat", 1, "rounds over the rates; each rate's figures are then those of its median run (1-9)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rs, err := parseInts(*rates)
	if err != nil {
		return fmt.Errorf("-rates: %w", err)
	}
	if *sweepFile != "" {
		var sw SweepResult
		if err := readJSON(filepath.Dir(*sweepFile), filepath.Base(*sweepFile), &sw); err == nil && sw.Held > 0 {
			rs = append(rs, int(sw.Held))
		}
	}
	slices.Sort(rs)
	rs = slices.Compact(rs)
	tgt, err := c.target()
	if err != nil {
		return err
	}
	auditURL := strings.TrimRight(envOr(getenv, "THREATVIEW_AUDIT_URL", "http://127.0.0.1:8081"), "/")
	base := strings.TrimRight(c.url, "/")
	if *metrics == "" {
		*metrics = "collector=" + base + "/metrics,auditlogger=" + auditURL + "/metrics"
	}
	if *profiles == "" {
		*profiles = "collector=" + base + ",auditlogger=" + auditURL
	}
	scrapes, err := parseNamedURLs(*metrics)
	if err != nil {
		return fmt.Errorf("-metrics: %w", err)
	}
	profs, err := parseNamedURLs(*profiles)
	if err != nil {
		return fmt.Errorf("-profile: %w", err)
	}
	if *profSecs < 1 {
		return fmt.Errorf("-profile-seconds %d: want at least 1", *profSecs)
	}
	if time.Duration(*profSecs)*time.Second > *step {
		*profSecs = int(step.Seconds())
		fmt.Fprintf(stderr, "warning: -profile-seconds cut to the step, %d s\n", *profSecs)
	}
	if *repeat < 1 || *repeat > 9 {
		return fmt.Errorf("-repeat %d: want 1 to 9", *repeat)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}

	res := CPUResult{Setup: c.setup(nil), Label: *label, Step: *step, StepWarmup: *warm, P95Limit: *limit, ProfileRate: *profRate, ProfileSeconds: *profSecs}
	client := &http.Client{Timeout: 5 * time.Second}
	// Rounds run every rate in turn, so that a slow drift of the machine
	// (another tenant of the host, the broker's compiler) falls on all rates
	// alike rather than on the rate that happened to run last.
	for n := range *repeat * len(rs) {
		round, i := n/len(rs)+1, n%len(rs)
		r := rs[i]
		gen, err := c.generator(uint64(500 + n))
		if err != nil {
			return err
		}
		// Requests are generated before each load, not during it, so the
		// generator's share of the machine is sending and receiving only;
		// with -sent-at they are generated as they are sent, since a sent_at
		// seconds old would read as a skewed device clock.
		source := func(d time.Duration) (load.Source, error) {
			if c.sentAt {
				return gen, nil
			}
			return load.PregenerateFor(gen, float64(r), d)
		}
		if *warm > 0 {
			lead, err := source(*warm)
			if err != nil {
				return err
			}
			if _, err := load.Open(ctx, tgt, lead, fmt.Sprintf("%d/s lead-in", r), float64(r), *warm, nil, nil); err != nil {
				return err
			}
		}
		reqs, err := source(*step)
		if err != nil {
			return err
		}
		st := CPUStep{Rate: float64(r)}
		if *repeat > 1 {
			st.Run = round
		}
		warnf := func(f string, a ...any) {
			msg := fmt.Sprintf(f, a...)
			st.Warnings = append(st.Warnings, msg)
			fmt.Fprintf(stderr, "warning: %d/s: %s\n", r, msg)
		}
		before := scrapeAll(ctx, client, scrapes, warnf)
		m0, err := readMachine()
		if err != nil {
			return err
		}
		t0 := m0.at
		sampler := procstat.StartCPU(ctx, samplerProcs(*pidDir))
		var profWait func() map[string]string
		if round == 1 && *profRate > 0 && float64(r) == *profRate && len(profs) > 0 {
			profWait = fetchProfiles(ctx, profs, *profSecs, c.out, r, warnf)
		}
		out, err := load.Open(ctx, tgt, reqs, fmt.Sprintf("%d/s", r), float64(r), *step, nil, c.progress(stderr))
		st.Procs = sampler.Stop()
		m1, merr := readMachine()
		st.Wall = m1.at.Sub(t0)
		if err != nil {
			return err
		}
		if merr != nil {
			return merr
		}
		if profWait != nil {
			st.Profiles = profWait()
		}
		after := scrapeAll(ctx, client, scrapes, warnf)
		st.Summary = out.Summary()
		st.Codes = codesString(out)
		st.Accepted = out.Accepted
		st.Held = st.Summary.Failed == 0 && st.Summary.P95 <= *limit && st.Summary.Throughput() >= 0.95*float64(r)
		st.CPUs = m1.cpus
		st.MachineCPU = machineBusy(m0, m1)
		st.MachineCPUSampled = m1.busy - m0.busy
		for _, u := range st.Procs {
			if strings.HasPrefix(u.Name, "loadtest") {
				st.GeneratorCPU += u.CPUSeconds
			}
		}
		st.Messages = messageRatios(before, after)
		res.Runs = append(res.Runs, st)
		fmt.Fprintf(stderr, "cpu %d/s: %.1f/s, p95 %s ms, %d accepted; machine %.2f cores, %.3f ms/request (%.3f ms without the generator)\n",
			r, st.Achieved(), stats.Ms(st.Summary.P95), st.Accepted, st.MachineCores(), st.MachineMs(), st.StackMs())
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if n < *repeat*len(rs)-1 && *pause > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(*pause):
			}
		}
	}
	res.Steps = medianRuns(res.Runs)
	if *repeat > 1 {
		res.Repeat = *repeat
	} else {
		res.Runs = nil
	}
	md := cpuMD(res)
	fmt.Fprint(stdout, md)
	if err := writeJSON(c.out, "cpu.json", res); err != nil {
		return err
	}
	if err := writeCSV(c.out, "cpu.csv", cpuCSV(res)); err != nil {
		return err
	}
	return writeFile(c.out, "cpu.md", md)
}

// namedURL is one NAME=URL of a list flag.
type namedURL struct{ name, url string }

// parseNamedURLs reads "a=http://127.0.0.1:1/x,b=..."; "none" is the empty
// list. Every URL must be on the loopback, like the load.
func parseNamedURLs(s string) ([]namedURL, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []namedURL
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, u, ok := strings.Cut(f, "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("%q is not NAME=URL", f)
		}
		if _, err := load.CheckTarget(u); err != nil {
			return nil, err
		}
		out = append(out, namedURL{name: name, url: strings.TrimRight(u, "/")})
	}
	return out, nil
}

// machineStat is the machine's CPU time from the first lines of /proc/stat.
type machineStat struct {
	busy float64 // seconds: user, nice, system, irq, softirq, steal
	idle float64 // seconds, iowait included
	cpus int
	at   time.Time // when it was read (monotonic)
}

// readMachine reads /proc/stat.
func readMachine() (machineStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineStat{}, err
	}
	m, err := parseProcStat(b)
	m.at = time.Now()
	return m, err
}

// machineBusy is the CPU seconds the machine was not idle between two reads:
// CPUs × elapsed − Δ(idle + iowait), within [0, CPUs × elapsed].
//
// On a tickless kernel the idle and iowait fields are kept from timestamps
// at each entry to and exit from idle, while user, system and the rest are
// samples taken at timer ticks. A load made of many wake-ups shorter than a
// tick is then counted poorly by the samples: on the bench machine, at 500
// req/s, their sum read 0.63 cores while the processes' own CPU time added
// up to 0.79 and the idle time left 0.82. The idle time is the exact one.
func machineBusy(m0, m1 machineStat) float64 {
	cpus := m1.cpus
	if cpus <= 0 {
		cpus = m0.cpus
	}
	total := float64(cpus) * m1.at.Sub(m0.at).Seconds()
	busy := total - (m1.idle - m0.idle)
	return math.Max(0, math.Min(total, busy))
}

// parseProcStat reads the aggregate "cpu" line (ticks of USER_HZ = 100)
// and counts the "cpuN" lines. Guest time is already inside user and nice,
// so it is not added again.
func parseProcStat(b []byte) (machineStat, error) {
	var m machineStat
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			if _, err := strconv.Atoi(f[0][3:]); err == nil {
				m.cpus++
			}
			continue
		}
		// cpu user nice system idle iowait irq softirq steal [guest guest_nice]
		if len(f) < 9 {
			return machineStat{}, fmt.Errorf("/proc/stat: short cpu line %q", sc.Text())
		}
		v := make([]float64, 8)
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return machineStat{}, fmt.Errorf("/proc/stat: field %d of %q: %w", i+1, sc.Text(), err)
			}
			v[i] = float64(n) / 100
		}
		m.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
		m.idle = v[3] + v[4]
		found = true
	}
	if !found {
		return machineStat{}, errors.New("/proc/stat: no cpu line")
	}
	return m, nil
}

// promSample is one line of the Prometheus text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseProm reads the Prometheus text exposition format: comments and
// blank lines skipped, label values unescaped, a trailing timestamp ignored.
func parseProm(text string) ([]promSample, error) {
	var out []promSample
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s := promSample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ \t")
		if i < 0 {
			return nil, fmt.Errorf("line %d: no value: %q", n+1, line)
		}
		s.name, line = line[:i], line[i:]
		if line[0] == '{' {
			rest, err := parseLabels(line[1:], s.labels)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			line = rest
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil, fmt.Errorf("line %d: no value", n+1)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value %q: %w", n+1, f[0], err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, nil
}

// parseLabels reads `name="value",...}` into m and returns what follows '}'.
func parseLabels(s string, m map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			return "", errors.New("unterminated labels")
		}
		if s[0] == '}' {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return "", fmt.Errorf("bad label in %q", s)
		}
		name := strings.TrimSpace(s[:eq])
		var v strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[i])
				}
				continue
			}
			v.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", fmt.Errorf("unterminated label value in %q", s)
		}
		m[name] = v.String()
		s = s[i+1:]
	}
}

// promSum adds the samples named name whose labels include want; ok is
// false when there is none.
func promSum(ss []promSample, name string, want map[string]string) (sum float64, ok bool) {
	for _, s := range ss {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			sum += s.value
			ok = true
		}
	}
	return sum, ok
}

// series names one counter: a metric and the labels it must carry.
type series struct {
	name   string
	labels map[string]string
}

// ratioDef is one MessageRatio: ΔNum/ΔDen on the Source endpoint.
type ratioDef struct {
	source, queue, what string
	num, den            series
}

// histo is the _sum and _count series of a histogram.
func histo(source, queue, what, name string, labels map[string]string) ratioDef {
	return ratioDef{source, queue, what, series{name + "_sum", labels}, series{name + "_count", labels}}
}

// ratioDefs are the per-message figures the services export. The collector
// writes each accepted request's audit record into the audit queue in the
// same broker transaction as its events, so the audit queue's messages for
// accepted requests are the events queue's.
var ratioDefs = []ratioDef{
	histo("collector", "events", "requests per message", "collector_message_requests", map[string]string{"destination": "events"}),
	histo("collector", "events", "events per message", "collector_message_events", nil),
	histo("collector", "audit (via audit logger)", "rejected requests per batch", "collector_message_requests", map[string]string{"destination": "audit"}),
	histo("auditlogger", "audit", "POSTs per message", "auditlogger_posts_per_message", nil),
	{"auditlogger", "audit", "records per message",
		series{"auditlogger_records_published_total", nil}, series{"auditlogger_broker_messages_total", map[string]string{"result": "ok"}}},
}

// messageRatios computes every ratio whose counters both endpoints' reads
// have and whose denominator moved.
func messageRatios(before, after map[string][]promSample) []MessageRatio {
	var out []MessageRatio
	for _, d := range ratioDefs {
		b, a := before[d.source], after[d.source]
		if b == nil || a == nil {
			continue
		}
		// A series that first appears during the step started at zero.
		n0, _ := promSum(b, d.num.name, d.num.labels)
		m0, _ := promSum(b, d.den.name, d.den.labels)
		n1, ok1 := promSum(a, d.num.name, d.num.labels)
		m1, ok2 := promSum(a, d.den.name, d.den.labels)
		if !ok1 || !ok2 {
			continue
		}
		r := MessageRatio{Source: d.source, Queue: d.queue, What: d.what, Num: n1 - n0, Messages: m1 - m0}
		if r.Messages <= 0 {
			continue
		}
		r.Per = r.Num / r.Messages
		out = append(out, r)
	}
	return out
}

// scrapeAll reads every endpoint; a failure is a warning and leaves the
// endpoint out.
func scrapeAll(ctx context.Context, client *http.Client, eps []namedURL, warnf func(string, ...any)) map[string][]promSample {
	out := map[string][]promSample{}
	for _, ep := range eps {
		ss, err := scrape(ctx, client, ep.url)
		if err != nil {
			warnf("metrics %s: %v", ep.name, err)
			continue
		}
		out[ep.name] = ss
	}
	return out
}

func scrape(ctx context.Context, client *http.Client, url string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	return parseProm(string(b))
}

// fetchProfiles starts a CPU profile of every target now and returns a
// function that waits for them and returns the files written (NAME-RATE.pprof
// in dir). A failed fetch is a warning.
func fetchProfiles(ctx context.Context, targets []namedURL, secs int, dir string, rate int, warnf func(string, ...any)) func() map[string]string {
	var mu sync.Mutex
	files := map[string]string{}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Duration(secs)*time.Second + 30*time.Second}
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("%s-%d.pprof", t.name, rate)
			err := fetchProfile(ctx, client, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.url, secs), filepath.Join(dir, name))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				warnf("profile %s: %v (the service serves /debug/pprof only with HTTP_PPROF=true)", t.name, err)
				return
			}
			files[t.name] = name
		}()
	}
	return func() map[string]string {
		wg.Wait()
		return files
	}
}

func fetchProfile(ctx context.Context, client *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return fmt.Errorf("GET %s: empty profile", url)
	}
	return os.WriteFile(path, b, 0o644)
}

// cpuMD is the Markdown of a cpu result: the machine per rate, each
// process per rate, and the per-message figures.
func cpuMD(res CPUResult) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("| rate | achieved | p95 ms | accepted | responses | machine cores | ms CPU / request | cores without generator | ms / request without generator |\n")
	p("|---:|---:|---:|---:|---|---:|---:|---:|---:|\n")
	for _, s := range res.Steps {
		held := ""
		if !s.Held {
			held = " (missed)"
		}
		p("| %.0f/s%s | %.1f/s | %s | %d | %s | %.2f of %d | %.3f | %.2f | %.3f |\n", s.Rate, held, s.Achieved(), stats.Ms(s.Summary.P95),
			s.Accepted, s.Codes, s.MachineCores(), s.CPUs, s.MachineMs(), s.StackCores(), s.StackMs())
	}
	p("\n")
	if names := procNames(res.Steps); len(names) > 0 {
		p("| process |")
		for _, s := range res.Steps {
			p(" %.0f/s: cores | ms / request |", s.Rate)
		}
		p("\n|---|")
		for range res.Steps {
			p("---:|---:|")
		}
		p("\n")
		for _, name := range names {
			p("| %s |", name)
			for _, s := range res.Steps {
				if u, ok := findUsage(s.Procs, name); ok {
					p(" %.3f | %.3f |", u.Cores(), msPerRequest(u.CPUSeconds, s.Accepted))
				} else {
					p(" – | – |")
				}
			}
			p("\n")
		}
		p("| everything else on the machine |")
		for _, s := range res.Steps {
			p(" %.3f | %.3f |", perSecond(s.OtherCPU(), s.Wall), msPerRequest(s.OtherCPU(), s.Accepted))
		}
		p("\n\n")
	}
	hasMessages := false
	for _, s := range res.Steps {
		hasMessages = hasMessages || len(s.Messages) > 0
	}
	if hasMessages {
		p("| rate | from | queue | figure | Δ counted | Δ messages | per message |\n|---:|---|---|---|---:|---:|---:|\n")
		for _, s := range res.Steps {
			for _, m := range s.Messages {
				p("| %.0f/s | %s | %s | %s | %.0f | %.0f | %.2f |\n", s.Rate, m.Source, m.Queue, m.What, m.Num, m.Messages, m.Per)
			}
		}
		p("\n")
	}
	if len(res.Runs) > len(res.Steps) {
		p("%s", runsMD(res))
	}
	for _, s := range res.Runs {
		for _, w := range s.Warnings {
			p("- %.0f/s: %s\n", s.Rate, w)
		}
	}
	return b.String()
}

// medianRuns keeps one run per rate, in the order the rates first appear:
// the run with the median CPU per accepted request (the lower of the two
// middle ones for an even count). The whole run is kept, so its per-process
// figures stay consistent with its machine figure.
func medianRuns(runs []CPUStep) []CPUStep {
	var rates []float64
	by := map[float64][]CPUStep{}
	for _, r := range runs {
		if _, ok := by[r.Rate]; !ok {
			rates = append(rates, r.Rate)
		}
		by[r.Rate] = append(by[r.Rate], r)
	}
	out := make([]CPUStep, 0, len(rates))
	for _, rate := range rates {
		rs := slices.Clone(by[rate])
		slices.SortStableFunc(rs, func(a, b CPUStep) int { return cmp.Compare(a.MachineMs(), b.MachineMs()) })
		out = append(out, rs[(len(rs)-1)/2])
	}
	return out
}

// runsMD lists every run of a repeated measurement, rate by rate.
func runsMD(res CPUResult) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("Each rate was measured %d times, in rounds over the rates; the tables above show each rate's median run by CPU per request (marked ✓ below).\n\n", res.Repeat)
	p("| rate | run | p95 ms | machine cores | ms CPU / request | ms / request without generator | generator cores |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range res.Steps {
		for _, r := range res.Runs {
			if r.Rate != m.Rate {
				continue
			}
			mark := ""
			if r.Run == m.Run {
				mark = " ✓"
			}
			p("| %.0f/s | %d%s | %s | %.2f | %.3f | %.3f | %.3f |\n", r.Rate, r.Run, mark, stats.Ms(r.Summary.P95),
				r.MachineCores(), r.MachineMs(), r.StackMs(), perSecond(r.GeneratorCPU, r.Wall))
		}
	}
	p("\n")
	return b.String()
}

// procNames lists every sampled process in the order first seen.
func procNames(steps []CPUStep) []string {
	var names []string
	for _, s := range steps {
		for _, u := range s.Procs {
			if !slices.Contains(names, u.Name) {
				names = append(names, u.Name)
			}
		}
	}
	return names
}

func findUsage(us []procstat.Usage, name string) (procstat.Usage, bool) {
	for _, u := range us {
		if u.Name == name {
			return u, true
		}
	}
	return procstat.Usage{}, false
}

func cpuCSV(res CPUResult) [][]string {
	out := [][]string{{"rate", "achieved_rate", "p95_ms", "accepted", "component", "cpu_seconds", "wall_seconds", "cores", "ms_per_request"}}
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	for _, s := range res.Steps {
		row := func(name string, cpu float64, wall time.Duration) {
			out = append(out, []string{f(s.Rate, 0), f(s.Achieved(), 1), stats.Ms(s.Summary.P95), strconv.Itoa(s.Accepted), name,
				f(cpu, 2), f(wall.Seconds(), 2), f(perSecond(cpu, wall), 3), f(msPerRequest(cpu, s.Accepted), 4)})
		}
		row("machine", s.MachineCPU, s.Wall)
		row("machine without generator", s.MachineCPU-s.GeneratorCPU, s.Wall)
		for _, u := range s.Procs {
			row(u.Name, u.CPUSeconds, u.Wall)
		}
		if len(s.Procs) > 0 {
			row("everything else on the machine", s.OtherCPU(), s.Wall)
		}
	}
	return out
}
