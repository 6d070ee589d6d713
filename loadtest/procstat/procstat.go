// Package procstat samples the CPU time and memory of the stack's processes
// from /proc while a load runs. Each component is a process tree (Postgres
// and MariaDB work in child processes or threads): its CPU time is the sum
// over the tree, including children already reaped, and its memory the sum
// of RSS and of PSS (which shares pages fairly between processes).
package procstat

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, which the kernel fixes at 100 for /proc on Linux.
const clockTicks = 100

// Proc is one component to sample: a name and the root pid of its tree.
type Proc struct {
	Name string
	PID  int
}

// Usage is what one component used during the sampled interval.
type Usage struct {
	Name       string
	PID        int
	CPUSeconds float64
	Wall       time.Duration
	PeakRSS    int64 // bytes, summed over the tree
	PeakPSS    int64 // bytes, summed over the tree; 0 when unreadable
	Gone       bool  // the process disappeared during sampling
}

// Cores is the average number of cores used over the interval.
func (u Usage) Cores() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return u.CPUSeconds / u.Wall.Seconds()
}

// FromPidDir reads every NAME.pid file in dir.
func FromPidDir(dir string) ([]Proc, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pid"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Proc
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if !isProgram(pid, name) {
			continue // stopped, or the pid now belongs to something else
		}
		out = append(out, Proc{Name: name, PID: pid})
	}
	return out, nil
}

// isProgram reports whether pid is alive and runs the program the stack
// starts under name (guards against a stale pid file and pid reuse).
func isProgram(pid int, name string) bool {
	if _, err := readStat(pid); err != nil {
		return false // gone or a zombie
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		// Unreadable (another user's process without privileges): trust the pid file.
		return true
	}
	exe = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	switch name {
	case "postgres":
		return exe == "postgres"
	case "mariadb", "mysql":
		return exe == "mariadbd" || exe == "mysqld"
	case "activemq":
		return exe == "java"
	}
	return exe == name || strings.HasPrefix(exe, name)
}

// Sampler samples a set of process trees at a fixed interval.
type Sampler struct {
	procs    []Proc
	interval time.Duration // 0: no sampling between Start and Stop
	mem      bool          // read RSS and PSS too

	mu      sync.Mutex
	start   map[int]float64
	last    map[int]float64
	peakRSS map[int]int64
	peakPSS map[int]int64
	gone    map[int]bool
	began   time.Time
	ended   time.Time
	done    chan struct{}
	cancel  context.CancelFunc
}

// Start begins sampling procs' CPU time and memory every interval until Stop.
func Start(ctx context.Context, procs []Proc, interval time.Duration) *Sampler {
	return start(ctx, procs, interval, true)
}

// StartCPU measures procs' CPU time only, reading /proc at Start and at Stop
// and nothing in between. It is for measuring CPU per request: the sampler
// runs inside the load generator, so its own reads are charged to the
// generator, and reading smaps_rollup of every process once a second cost
// about a tenth of the generator's CPU at 500 req/s. A process that exits in
// between is still counted through its parent's cutime and cstime.
func StartCPU(ctx context.Context, procs []Proc) *Sampler {
	return start(ctx, procs, 0, false)
}

func start(ctx context.Context, procs []Proc, interval time.Duration, mem bool) *Sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &Sampler{
		procs: procs, interval: interval, mem: mem,
		start: map[int]float64{}, last: map[int]float64{},
		peakRSS: map[int]int64{}, peakPSS: map[int]int64{}, gone: map[int]bool{},
		began: time.Now(), done: make(chan struct{}), cancel: cancel,
	}
	children := childMap()
	for _, p := range procs {
		cpu, _, _, ok := treeSample(children, p.PID, false)
		if !ok {
			s.gone[p.PID] = true
			continue
		}
		s.start[p.PID], s.last[p.PID] = cpu, cpu
	}
	go s.loop(ctx)
	return s
}

func (s *Sampler) loop(ctx context.Context) {
	defer close(s.done)
	if s.interval <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) sample() {
	children := childMap() // one scan of /proc per round, shared by every tree
	for _, p := range s.procs {
		cpu, rss, pss, ok := treeSample(children, p.PID, s.mem)
		s.mu.Lock()
		if !ok {
			s.gone[p.PID] = true
		} else {
			if cpu > s.last[p.PID] {
				s.last[p.PID] = cpu
			}
			s.peakRSS[p.PID] = max(s.peakRSS[p.PID], rss)
			s.peakPSS[p.PID] = max(s.peakPSS[p.PID], pss)
		}
		s.mu.Unlock()
	}
}

// Stop ends sampling and returns each component's usage.
func (s *Sampler) Stop() []Usage {
	s.cancel()
	<-s.done
	s.sample()
	s.ended = time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Usage, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, Usage{
			Name: p.Name, PID: p.PID,
			CPUSeconds: s.last[p.PID] - s.start[p.PID],
			Wall:       s.ended.Sub(s.began),
			PeakRSS:    s.peakRSS[p.PID], PeakPSS: s.peakPSS[p.PID],
			Gone: s.gone[p.PID],
		})
	}
	return out
}

// treeSample returns the CPU seconds of the tree rooted at pid (live
// processes plus the children each has reaped) and, when mem is set, its
// summed RSS and PSS in bytes.
func treeSample(children map[int][]int, root int, mem bool) (cpu float64, rss, pss int64, ok bool) {
	stack := []int{root}
	first := true
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		st, err := readStat(pid)
		if err != nil {
			if first {
				return 0, 0, 0, false
			}
			continue
		}
		first = false
		cpu += float64(st.utime+st.stime+st.cutime+st.cstime) / clockTicks
		if mem {
			rss += st.rssPages * int64(os.Getpagesize())
			pss += readPSS(pid)
		}
		stack = append(stack, children[pid]...)
	}
	return cpu, rss, pss, true
}

type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
	rssPages                     int64
}

// readStat parses /proc/PID/stat; the command name may hold spaces and
// parentheses, so fields are counted from the last ')'.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	return parseStat(b)
}

func parseStat(b []byte) (stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return stat{}, fmt.Errorf("short stat")
	}
	if f[0] == "Z" || f[0] == "X" {
		return stat{}, fmt.Errorf("zombie")
	}
	n := func(field int) int64 { v, _ := strconv.ParseInt(f[field-3], 10, 64); return v }
	return stat{
		ppid:  int(n(4)),
		utime: n(14), stime: n(15), cutime: n(16), cstime: n(17),
		rssPages: n(24),
	}, nil
}

func readPSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Pss:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// childMap maps each pid to its direct children.
func childMap() map[int][]int {
	m := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return m
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		m[st.ppid] = append(m[st.ppid], pid)
	}
	return m
}
