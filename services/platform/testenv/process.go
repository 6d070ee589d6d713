package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildMu    sync.Mutex
	buildCache = map[string]string{}
)

// MustBuild builds the command pkg (a path relative to the repository root,
// such as "./services/processor/cmd/processor") once per test binary and
// returns the executable's path, for tests that kill and restart a real
// process. Binaries go to .run/testbin (git-ignored), written under a
// temporary name and renamed, so concurrent test binaries never see half a
// file.
func MustBuild(tb testing.TB, pkg string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := buildCache[pkg]; ok {
		return bin
	}
	root := Root(tb)
	dir := filepath.Join(root, ".run", "testbin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatalf("build %s: %v", pkg, err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		tb.Fatalf("build %s: %v", pkg, err)
	}
	buildCache[pkg] = bin
	return bin
}

// SyncBuffer is a bytes.Buffer that a process or logger and the test may
// write and read at the same time.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
