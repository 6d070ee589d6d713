package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PostgresCPU returns the CPU time (user and system) used so far by the
// PostgreSQL server processes of database db, read from /proc: its backends
// (their command line names the database) and, with writers, the WAL
// writer, checkpointer and background writer too (they write on the
// backends' behalf: a write path's cost; a read's leaves them out). It needs
// the server on this machine (the local stack); ok is false otherwise.
// Benchmarks report it as PostgreSQL CPU per operation.
func PostgresCPU(db string, writers bool) (cpu time.Duration, ok bool) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		c := string(cmd)
		if !strings.HasPrefix(c, "postgres: ") {
			continue
		}
		background := strings.HasPrefix(c, "postgres: walwriter") || strings.HasPrefix(c, "postgres: checkpointer") ||
			strings.HasPrefix(c, "postgres: background writer")
		if !strings.Contains(c, " "+db+" ") && !(writers && background) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th (fields 14 and 15 of proc(5)).
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		cpu += time.Duration(u+s) * time.Second / 100 // USER_HZ
		ok = true
	}
	return cpu, ok
}
