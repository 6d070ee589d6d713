package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"threatview/loadtest/load"
	"threatview/loadtest/sim"
	"threatview/loadtest/stats"
)

// common are the flags every load command shares.
type common struct {
	url      string
	token    string
	app      string
	seed     uint64
	xff      bool
	networks string
	batch    int
	eventIDs bool
	sentAt   bool
	out      string
	quiet    bool
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func (c *common) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&c.url, "url", envOr(getenv, "THREATVIEW_COLLECTOR_URL", "http://127.0.0.1:8080"), "collector base URL (127.0.0.1 only)")
	fs.StringVar(&c.token, "token", getenv("THREATVIEW_DEMO_TOKEN"), "app token (default $THREATVIEW_DEMO_TOKEN)")
	fs.StringVar(&c.app, "app", envOr(getenv, "THREATVIEW_DEMO_APP", "demo-app"), "app id bound to the token")
	fs.Uint64Var(&c.seed, "seed", 1, "simulator seed")
	fs.BoolVar(&c.xff, "xff", true, "send the simulated client address in X-Forwarded-For")
	fs.StringVar(&c.networks, "networks", "", "comma-separated client networks (default: the test GeoIP networks)")
	fs.IntVar(&c.batch, "batch", 1, "events per request (1 = single-event body)")
	fs.BoolVar(&c.eventIDs, "event-ids", false, "give every event a client event_id")
	fs.BoolVar(&c.sentAt, "sent-at", false, "set sent_at on every event")
	fs.StringVar(&c.out, "out", defaultOut(getenv), "directory for results (Markdown, CSV, JSON, SVG)")
	fs.BoolVar(&c.quiet, "quiet", false, "no live progress line")
}

func (c *common) target() (load.Target, error) {
	if c.token == "" {
		return load.Target{}, errors.New("no token: set -token or THREATVIEW_DEMO_TOKEN (source .run/env)")
	}
	if _, err := load.CheckTarget(c.url); err != nil {
		return load.Target{}, err
	}
	return load.Target{URL: c.url, Token: c.token, ForwardedFor: c.xff}, nil
}

func (c *common) generator(seedOffset uint64) (*sim.Generator, error) {
	cfg := sim.Config{AppID: c.app, Seed: c.seed + seedOffset, BatchSize: c.batch, EventIDs: c.eventIDs, SentAt: c.sentAt}
	if c.networks != "" {
		nets, err := sim.ParseNetworks(strings.Split(c.networks, ","))
		if err != nil {
			return nil, err
		}
		cfg.Networks = nets
	}
	return sim.New(cfg)
}

func (c *common) progress(stderr io.Writer) io.Writer {
	if c.quiet {
		return nil
	}
	return stderr
}

func (c *common) setup(extra map[string]string) Setup {
	return Setup{
		Time: time.Now().UTC(), URL: c.url, App: c.app, Seed: c.seed, Batch: c.batch,
		ForwardedFor: c.xff, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		CPUModel: cpuModel(), MemTotal: memTotal(), Extra: extra,
	}
}

// Setup records how a measurement was taken.
type Setup struct {
	Time         time.Time         `json:"time"`
	URL          string            `json:"url"`
	App          string            `json:"app"`
	Seed         uint64            `json:"seed"`
	Batch        int               `json:"batch"`
	ForwardedFor bool              `json:"forwarded_for"`
	CPUs         int               `json:"cpus"`
	CPUModel     string            `json:"cpu_model"`
	MemTotal     int64             `json:"mem_total"`
	GoVersion    string            `json:"go_version"`
	Extra        map[string]string `json:"extra,omitempty"`
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			if i := strings.IndexByte(l, ':'); i >= 0 {
				return strings.TrimSpace(l[i+1:])
			}
		}
	}
	return ""
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "MemTotal:") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

func writeJSON(dir, name string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
}

func readJSON(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeFile(dir, name, content string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
}

func writeCSV(dir, name string, records [][]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(records); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func summariesCSV(rows []stats.Summary) [][]string {
	out := [][]string{stats.CSVHeader()}
	for _, r := range rows {
		out = append(out, r.CSVRecord())
	}
	return out
}

func summariesMD(rows []stats.Summary) string {
	var b strings.Builder
	_ = stats.WriteMarkdown(&b, rows)
	return b.String()
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func codesString(r load.Result) string {
	var parts []string
	for c, n := range r.Codes {
		parts = append(parts, fmt.Sprintf("%d×%d", n, c))
	}
	for e, n := range r.Errors {
		parts = append(parts, fmt.Sprintf("%d×%q", n, e))
	}
	return strings.Join(sortStrings(parts), ", ")
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func logTo(w io.Writer) func(string, ...any) {
	return func(f string, a ...any) { fmt.Fprintf(w, f+"\n", a...) }
}

// defaultOut is .run/loadtest under the repository when .run/env has been
// sourced (git-ignored, beside the stack's state), else ./loadtest-results.
func defaultOut(getenv func(string) string) string {
	if root := getenv("THREATVIEW_ROOT"); root != "" {
		return filepath.Join(root, ".run", "loadtest")
	}
	return "loadtest-results"
}

// idsFile is where a load writes every id it gets back with a 202, one per
// line, for verify.
type idsFile struct {
	Path string
	f    *os.File
	w    *bufio.Writer
}

// createIDsFile creates dir (if need be) and dir/name.
func createIDsFile(dir, name string) (*idsFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &idsFile{Path: path, f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

// Sink is the load's sink for the ids.
func (x *idsFile) Sink() load.IDSink { return load.FileSink(x.w) }

// Close writes what is buffered and closes the file; a second call does
// nothing.
func (x *idsFile) Close() error {
	if x.f == nil {
		return nil
	}
	err := x.w.Flush()
	if cerr := x.f.Close(); err == nil {
		err = cerr
	}
	x.f = nil
	if err != nil {
		return fmt.Errorf("write %s: %w", x.Path, err)
	}
	return nil
}
