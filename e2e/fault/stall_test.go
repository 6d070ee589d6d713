//go:build fault

package fault

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"threatview/platform/testenv"
)

// stall freezes a component with SIGSTOP for d, then lets it go on with
// SIGCONT: a hang (a stalled JVM, a paused VM), not a crash. Its sockets stay
// open and nothing answers on them.
func stall(name string, d time.Duration) fault {
	return fault{name: fmt.Sprintf("SIGSTOP %s %s", name, d), inject: func(t *testing.T, w *window, _ func() outcome) {
		pids := processTree(t, name)
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				signalAll(t, pids, syscall.SIGCONT)
			}
		}
		// Never leave the shared stack frozen, whatever fails below.
		t.Cleanup(resume)
		w.fault = time.Now()
		signalAll(t, pids, syscall.SIGSTOP)
		w.injected = time.Now()
		time.Sleep(d)
		resume()
		w.repaired = time.Now()
	}}
}

// processTree returns the pid of the stack's component name (from its pid
// file) and of all its descendants.
func processTree(t *testing.T, name string) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.Root(t), ".run", "pid", name+".pid"))
	if err != nil {
		t.Fatalf("pid of %s: %v", name, err)
	}
	root, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("pid file of %s: %q", name, raw)
	}
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[pid] = pp
		}
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		for pid, pp := range parent {
			if pp == tree[i] {
				tree = append(tree, pid)
			}
		}
	}
	return tree
}

func signalAll(t *testing.T, pids []int, sig syscall.Signal) {
	t.Helper()
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil && err != syscall.ESRCH {
			t.Errorf("kill -%d %d: %v", sig, p, err)
		}
	}
}
