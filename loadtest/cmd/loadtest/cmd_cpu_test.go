package main

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"threatview/loadtest/load"
	"threatview/loadtest/procstat"
	"threatview/loadtest/stats"
)

func TestParseProcStat(t *testing.T) {
	in := `cpu  1000 50 300 9000 200 10 40 7 100 0
cpu0 500 25 150 4500 100 5 20 3 50 0
cpu1 500 25 150 4500 100 5 20 4 50 0
intr 123456 0 0
ctxt 987654
cpufreq 1
`
	got, err := parseProcStat([]byte(in))
	if err != nil {
		t.Fatalf("parseProcStat = %v", err)
	}
	// busy = user + nice + system + irq + softirq + steal (guest is in user).
	want := machineStat{busy: (1000 + 50 + 300 + 10 + 40 + 7) / 100.0, idle: (9000 + 200) / 100.0, cpus: 2}
	if math.Abs(got.busy-want.busy) > 1e-9 || math.Abs(got.idle-want.idle) > 1e-9 || got.cpus != want.cpus {
		t.Errorf("parseProcStat = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "intr 1 2\n", "cpu 1 2 3\n", "cpu 1 2 3 x 5 6 7 8\n"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) = nil error, want one", bad)
		}
	}
}

func TestMachineBusy(t *testing.T) {
	at := time.Unix(1000, 0)
	m0 := machineStat{busy: 50, idle: 100, cpus: 2, at: at}
	for _, c := range []struct {
		name      string
		idle      float64 // Δidle over 10 s on 2 CPUs
		busy      float64 // Δ of the sampled busy fields
		want      float64
		elapsed   time.Duration
		cpusAfter int
	}{
		// 20 s of CPU time, 12 idle: 8 busy, whatever the samples say.
		{name: "idle time decides", idle: 12, busy: 6.3, want: 8, elapsed: 10 * time.Second, cpusAfter: 2},
		{name: "all idle", idle: 20, busy: 0.2, want: 0, elapsed: 10 * time.Second, cpusAfter: 2},
		{name: "never idle", idle: 0, busy: 19, want: 20, elapsed: 10 * time.Second, cpusAfter: 2},
		// idle that runs ahead of the clock (a read's own skew) is clamped
		{name: "idle ahead of the clock", idle: 20.5, want: 0, elapsed: 10 * time.Second, cpusAfter: 2},
		{name: "idle behind (iowait going back)", idle: -1, want: 20, elapsed: 10 * time.Second, cpusAfter: 2},
		{name: "cpu count missing after", idle: 12, want: 8, elapsed: 10 * time.Second, cpusAfter: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m1 := machineStat{busy: m0.busy + c.busy, idle: m0.idle + c.idle, cpus: c.cpusAfter, at: at.Add(c.elapsed)}
			if got := machineBusy(m0, m1); math.Abs(got-c.want) > 1e-9 {
				t.Errorf("machineBusy = %v, want %v", got, c.want)
			}
		})
	}
}

// TestMachineBusy_CountsShortWakeups burns CPU in bursts far shorter than a
// timer tick, the shape of a service answering requests, and checks that the
// machine's busy time covers this process's own CPU time over the same
// interval (the machine can only be busier than one of its processes).
func TestMachineBusy_CountsShortWakeups(t *testing.T) {
	m0, err := readMachine()
	if err != nil {
		t.Fatal(err)
	}
	self := procstat.StartCPU(context.Background(), []procstat.Proc{{Name: "test", PID: os.Getpid()}})
	for i := 0; i < 1000; i++ { // about 0.2 s of CPU in 200 µs bursts
		for s := time.Now(); time.Since(s) < 200*time.Microsecond; {
		}
		time.Sleep(200 * time.Microsecond)
	}
	own := self.Stop()[0].CPUSeconds
	m1, err := readMachine()
	if err != nil {
		t.Fatal(err)
	}
	busy := machineBusy(m0, m1)
	t.Logf("machine busy %.3f s (sampled fields %.3f s), this process %.3f s, over %v", busy, m1.busy-m0.busy, own, m1.at.Sub(m0.at))
	if own < 0.1 {
		t.Fatalf("the bursts used only %.3f s of CPU; the test did not load the machine", own)
	}
	// own is in ticks of 10 ms, so allow two ticks of rounding.
	if busy < own-0.02 {
		t.Errorf("machine busy %.3f s < this process's %.3f s", busy, own)
	}
}

const promText = `# HELP collector_message_requests Requests coalesced into one message, by destination (events, audit).
# TYPE collector_message_requests histogram
collector_message_requests_bucket{destination="events",le="1"} 1495
collector_message_requests_bucket{destination="events",le="+Inf"} 20323
collector_message_requests_sum{destination="events"} 88080
collector_message_requests_count{destination="events"} 20323
collector_message_requests_sum{destination="audit"} 12
collector_message_requests_count{destination="audit"} 4
odd_labels{path="a \"quoted\", \\ value",x="1"} 2.5e3 1700000000000
auditlogger_broker_messages_total{result="error"} 3
auditlogger_broker_messages_total{result="ok"} 40
auditlogger_records_published_total 400
up 1
`

func TestParseProm(t *testing.T) {
	ss, err := parseProm(promText)
	if err != nil {
		t.Fatalf("parseProm = %v", err)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
		ok     bool
	}{
		{"collector_message_requests_sum", map[string]string{"destination": "events"}, 88080, true},
		{"collector_message_requests_count", map[string]string{"destination": "events"}, 20323, true},
		{"collector_message_requests_count", map[string]string{"destination": "audit"}, 4, true},
		{"collector_message_requests_count", map[string]string{"destination": "nowhere"}, 0, false},
		{"collector_message_requests_bucket", map[string]string{"le": "+Inf"}, 20323, true},
		{"auditlogger_broker_messages_total", nil, 43, true}, // every result
		{"auditlogger_broker_messages_total", map[string]string{"result": "ok"}, 40, true},
		{"odd_labels", map[string]string{"path": `a "quoted", \ value`}, 2500, true},
		{"up", nil, 1, true},
		{"missing", nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := promSum(ss, tt.name, tt.labels)
		if got != tt.want || ok != tt.ok {
			t.Errorf("promSum(%s%v) = %v, %v, want %v, %v", tt.name, tt.labels, got, ok, tt.want, tt.ok)
		}
	}
	for _, bad := range []string{"novalue", `x{a="1} 2`, `x{a=1} 2`, "x abc"} {
		if _, err := parseProm(bad); err == nil {
			t.Errorf("parseProm(%q) = nil error, want one", bad)
		}
	}
}

func TestMessageRatios(t *testing.T) {
	before, err := parseProm(promText)
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseProm(strings.NewReplacer(
		`collector_message_requests_sum{destination="events"} 88080`, `collector_message_requests_sum{destination="events"} 118080`, // +30000 requests
		`collector_message_requests_count{destination="events"} 20323`, `collector_message_requests_count{destination="events"} 22323`, // in +2000 messages
		`auditlogger_broker_messages_total{result="ok"} 40`, `auditlogger_broker_messages_total{result="ok"} 50`,
		`auditlogger_records_published_total 400`, `auditlogger_records_published_total 700`,
	).Replace(promText) + "collector_message_events_sum 60\ncollector_message_events_count 20\n")
	if err != nil {
		t.Fatal(err)
	}
	got := messageRatios(map[string][]promSample{"collector": before, "auditlogger": before},
		map[string][]promSample{"collector": after, "auditlogger": after})
	want := map[string]float64{
		"events/requests per message": 15,
		"events/events per message":   3, // a series new during the step counts from zero
		"audit/records per message":   30,
	}
	if len(got) != len(want) {
		t.Fatalf("messageRatios = %+v, want %d ratios (the audit batches did not move)", got, len(want))
	}
	for _, r := range got {
		k := r.Queue + "/" + r.What
		if w, ok := want[k]; !ok || math.Abs(r.Per-w) > 1e-9 {
			t.Errorf("ratio %s = %v, want %v", k, r.Per, w)
		}
	}
	if r := messageRatios(map[string][]promSample{}, map[string][]promSample{"collector": after}); r != nil {
		t.Errorf("messageRatios without a read before = %+v, want none", r)
	}
}

func TestCPUStep_PerRequest(t *testing.T) {
	s := CPUStep{
		Rate: 1500, Accepted: 30000, Wall: 20 * time.Second, CPUs: 2,
		MachineCPU: 24, GeneratorCPU: 6,
		Summary: stats.Summary{Samples: 30000, Span: 20 * time.Second},
	}
	tests := []struct {
		name      string
		got, want float64
	}{
		{"MachineCores", s.MachineCores(), 1.2},
		{"MachineMs", s.MachineMs(), 0.8},
		{"StackCores", s.StackCores(), 0.9},
		{"StackMs", s.StackMs(), 0.6},
		{"Achieved", s.Achieved(), 1500},
		{"msPerRequest(nothing accepted)", msPerRequest(3, 0), 0},
		{"perSecond(no wall)", perSecond(3, 0), 0},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	res := CPUResult{Steps: []CPUStep{s}}
	res.Steps[0].Procs = []procstat.Usage{{Name: "collector", CPUSeconds: 9, Wall: 20 * time.Second}}
	md := cpuMD(res)
	for _, want := range []string{"| 1500/s (missed) | 1500.0/s |", "| 1.20 of 2 | 0.800 | 0.90 | 0.600 |", "| collector | 0.450 | 0.300 |",
		"| everything else on the machine | 0.750 | 0.500 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("cpuMD lacks %q:\n%s", want, md)
		}
	}
	csv := cpuCSV(res)
	if len(csv) != 5 || csv[3][4] != "collector" || csv[3][8] != "0.3000" || csv[4][5] != "15.00" {
		t.Errorf("cpuCSV = %q", csv)
	}
}

func TestMedianRuns(t *testing.T) {
	run := func(rate float64, n int, cpu float64) CPUStep {
		return CPUStep{Rate: rate, Run: n, Accepted: 1000, MachineCPU: cpu, Wall: 10 * time.Second,
			Procs: []procstat.Usage{{Name: "collector", CPUSeconds: cpu / 2}}}
	}
	runs := []CPUStep{
		run(500, 1, 9), run(1500, 1, 4),
		run(500, 2, 5), run(1500, 2, 6),
		run(500, 3, 7), run(1500, 3, 5),
	}
	got := medianRuns(runs)
	if len(got) != 2 || got[0].Rate != 500 || got[1].Rate != 1500 {
		t.Fatalf("medianRuns = %+v, want one run per rate in rate order", got)
	}
	// 500: 5, 7, 9 -> run 3; 1500: 4, 5, 6 -> run 3. The whole run is kept.
	if got[0].Run != 3 || got[0].MachineCPU != 7 || got[0].Procs[0].CPUSeconds != 3.5 {
		t.Errorf("500/s median = %+v, want run 3 with its own processes", got[0])
	}
	if got[1].Run != 3 || got[1].MachineCPU != 5 {
		t.Errorf("1500/s median = %+v, want run 3", got[1])
	}
	// An even count takes the lower middle; a single run is itself.
	if m := medianRuns([]CPUStep{run(500, 1, 8), run(500, 2, 2)}); m[0].Run != 2 {
		t.Errorf("median of two = run %d, want the cheaper, run 2", m[0].Run)
	}
	if m := medianRuns(runs[:1]); len(m) != 1 || m[0].Run != 1 {
		t.Errorf("median of one = %+v", m)
	}

	res := CPUResult{Steps: got, Repeat: 3, Runs: runs}
	md := cpuMD(res)
	for _, want := range []string{"measured 3 times", "| 500/s | 3 ✓ |", "| 500/s | 1 |", "| 1500/s | 3 ✓ |", "| 1500/s | 2 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("cpuMD lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(cpuMD(CPUResult{Steps: got}), "measured 3 times") {
		t.Error("a single run lists runs")
	}
}

func TestParseNamedURLs(t *testing.T) {
	got, err := parseNamedURLs("collector=http://127.0.0.1:8080/, auditlogger=http://127.0.0.1:8081")
	if err != nil || len(got) != 2 || got[0] != (namedURL{"collector", "http://127.0.0.1:8080"}) || got[1].name != "auditlogger" {
		t.Errorf("parseNamedURLs = %+v, %v", got, err)
	}
	if got, err := parseNamedURLs("none"); err != nil || got != nil {
		t.Errorf("parseNamedURLs(none) = %+v, %v", got, err)
	}
	if _, err := parseNamedURLs("x=http://10.0.0.1:8080"); !errors.Is(err, load.ErrNotLoopback) {
		t.Errorf("parseNamedURLs(not loopback) = %v, want ErrNotLoopback", err)
	}
	if _, err := parseNamedURLs("http://127.0.0.1:8080"); err == nil {
		t.Error("parseNamedURLs without a name = nil error")
	}
}

func TestCPU_NotLoopback(t *testing.T) {
	err := run(context.Background(), []string{"cpu", "-token", "t", "-profile", "c=http://192.0.2.1:8080"}, env(nil), io.Discard, io.Discard)
	if !errors.Is(err, load.ErrNotLoopback) {
		t.Errorf("cpu with a remote profile target = %v, want ErrNotLoopback", err)
	}
}
