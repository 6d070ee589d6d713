package procstat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses must not shift the fields.
	line := "1234 (my (odd) proc) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 10 5 20 0 8 0 100 123456789 2048 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatalf("parseStat = %v", err)
	}
	want := stat{ppid: 1, utime: 250, stime: 75, cutime: 10, cstime: 5, rssPages: 2048}
	if st != want {
		t.Errorf("parseStat = %+v, want %+v", st, want)
	}
}

func TestParseStat_Errors(t *testing.T) {
	for _, in := range []string{"", "12 (x", "12 (x) S 1 2", "12 (x) Z 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 1 1 1"} {
		if _, err := parseStat([]byte(in)); err == nil {
			t.Errorf("parseStat(%q) = nil error, want one", in)
		}
	}
}

func TestFromPidDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Base(exe)
	write(self+".pid", strconv.Itoa(os.Getpid())+"\n")
	write("postgres.pid", strconv.Itoa(os.Getpid())) // our pid, but we are not postgres
	write("garbage.pid", "not a pid")
	write("gone.pid", "999999999")
	write("notes.txt", strconv.Itoa(os.Getpid()))
	procs, err := FromPidDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0].Name != self || procs[0].PID != os.Getpid() {
		t.Errorf("FromPidDir = %+v, want only %s", procs, self)
	}
}

func TestSampler_Self(t *testing.T) {
	s := Start(context.Background(), []Proc{{Name: "self", PID: os.Getpid()}, {Name: "gone", PID: 999999999}}, 10*time.Millisecond)
	// Burn some CPU so the counter moves by at least a tick.
	deadline := time.Now().Add(100 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	_ = x
	us := s.Stop()
	if len(us) != 2 {
		t.Fatalf("Stop returned %d usages, want 2", len(us))
	}
	self := us[0]
	if self.CPUSeconds <= 0 || self.PeakRSS <= 0 || self.Gone {
		t.Errorf("self usage = %+v, want CPU time and RSS", self)
	}
	if !us[1].Gone {
		t.Errorf("missing process not reported gone: %+v", us[1])
	}
}

func BenchmarkSampler_Round(b *testing.B) {
	procs, _ := FromPidDir(os.Getenv("THREATVIEW_ROOT") + "/.run/pid")
	procs = append(procs, Proc{Name: "self", PID: os.Getpid()})
	s := &Sampler{procs: procs, start: map[int]float64{}, last: map[int]float64{}, peakRSS: map[int]int64{}, peakPSS: map[int]int64{}, gone: map[int]bool{}}
	for b.Loop() {
		s.sample()
	}
}

func TestStartCPU_CountsReapedChildrenAndSkipsMemory(t *testing.T) {
	s := StartCPU(context.Background(), []Proc{{Name: "self", PID: os.Getpid()}})
	// A child that burns CPU and exits between Start and Stop: no sample sees
	// it alive, so only our cutime can carry its time.
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	us := s.Stop()
	if len(us) != 1 {
		t.Fatalf("Stop returned %d usages, want 1", len(us))
	}
	u := us[0]
	if child < 50*time.Millisecond {
		t.Fatalf("child used only %s of CPU; the test needs more to tell", child)
	}
	if got := time.Duration(u.CPUSeconds * float64(time.Second)); got < child/2 {
		t.Errorf("CPU = %s, want at least half the reaped child's %s", got, child)
	}
	if u.PeakRSS != 0 || u.PeakPSS != 0 {
		t.Errorf("memory read by a CPU-only sampler: %+v", u)
	}
}
