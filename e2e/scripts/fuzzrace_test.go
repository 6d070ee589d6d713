// Package scripts tests decisions the stack's shell scripts make on their own.
package scripts

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// stackScript is scripts/stack.sh, seen from this package's directory.
const stackScript = "../../scripts/stack.sh"

// isDeadlineRace runs `stack.sh fuzz-deadline-race` on a go test output and
// says whether the script would run that fuzz target once more.
func isDeadlineRace(t *testing.T, output string) bool {
	t.Helper()
	cmd := exec.Command("bash", stackScript, "fuzz-deadline-race")
	cmd.Stdin = strings.NewReader(output)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &exit) && exit.ExitCode() == 1 && stderr.Len() == 0:
		return false
	default:
		t.Fatalf("stack.sh fuzz-deadline-race: %v, stderr: %s", err, stderr.String())
		return false
	}
}

// The output CI printed when Go's fuzz coordinator reported its own
// -fuzztime deadline as the run's failure (go.dev/issue/75804): nothing was
// found, and no failing input was written.
const coordinatorRace = `[stack] fuzz threatview/collector FuzzDecode for 5s
fuzz: elapsed: 0s, gathering baseline coverage: 0/136 completed
fuzz: elapsed: 0s, gathering baseline coverage: 136/136 completed, now fuzzing with 2 workers
fuzz: elapsed: 3s, execs: 72711 (24231/sec), new interesting: 8 (total: 144)
fuzz: elapsed: 6s, execs: 74972 (754/sec), new interesting: 8 (total: 144)
fuzz: elapsed: 6s, execs: 74972 (0/sec), new interesting: 8 (total: 144)
--- FAIL: FuzzDecode (6.05s)
    context deadline exceeded
FAIL
exit status 1
FAIL	threatview/collector	6.079s
`

func TestFuzzDeadlineRace_CoordinatorDeadlineIsRunAgain(t *testing.T) {
	if !isDeadlineRace(t, coordinatorRace) {
		t.Fatal("the coordinator's bare deadline error was not recognised: CI fails on a race in Go, not on a finding")
	}
}

func TestFuzzDeadlineRace_OtherFailuresAreNot(t *testing.T) {
	cases := map[string]string{
		"the target's own failure mentions a deadline": `--- FAIL: FuzzDecode (0.31s)
    --- FAIL: FuzzDecode (0.00s)
        decode_test.go:40: context deadline exceeded

    Failing input written to testdata/fuzz/FuzzDecode/5c2f8e0a1b7d9e33
    To re-run:
    go test -run=FuzzDecode/5c2f8e0a1b7d9e33
FAIL
exit status 1
FAIL	threatview/collector	0.330s
`,
		"a worker crashed": `--- FAIL: FuzzDecode (1.02s)
    fuzzing process hung or terminated unexpectedly: exit status 2
    Failing input written to testdata/fuzz/FuzzDecode/0d1f
FAIL
exit status 1
FAIL	threatview/collector	1.040s
`,
		"the deadline beside another message": `--- FAIL: FuzzDecode (6.05s)
    context deadline exceeded
    open testdata/fuzz/FuzzDecode: permission denied
FAIL
FAIL	threatview/collector	6.079s
`,
		"a panic outside the fuzz block": "panic: runtime error: index out of range [3] with length 3\n" + coordinatorRace,
		"the package did not build":      "# threatview/collector\n./decode.go:12:2: undefined: x\nFAIL\tthreatview/collector [build failed]\n",
		"a passing run":                  "fuzz: elapsed: 5s, execs: 1000 (200/sec)\nPASS\nok  \tthreatview/collector\t5.1s\n",
	}
	for name, out := range cases {
		t.Run(name, func(t *testing.T) {
			if isDeadlineRace(t, out) {
				t.Fatalf("taken for the coordinator's deadline race, so it would be run again:\n%s", out)
			}
		})
	}
}

// TestFuzzDeadlineRace_RealFinding runs a real fuzz target that fails on an
// input the fuzzer finds at once, and checks that its output is a finding.
func TestFuzzDeadlineRace_RealFinding(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to fuzz: %v", err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module fuzzfinding\n\ngo 1.26\n",
		"f_test.go": `package fuzzfinding

import "testing"

func FuzzFinding(f *testing.F) {
	f.Add([]byte("seed"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			t.Fatal("empty input")
		}
	})
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "test", "-run", "^$", "-fuzz", "^FuzzFinding$", "-fuzztime", "60s", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the fuzz target should have failed on an empty input:\n%s", out)
	}
	if !strings.Contains(string(out), "Failing input written to") {
		t.Fatalf("no failing input was written:\n%s", out)
	}
	if isDeadlineRace(t, string(out)) {
		t.Fatalf("a real finding was taken for the coordinator's deadline race:\n%s", out)
	}
}

// fuzzOne runs `stack.sh fuzz-one` with a stand-in go command on PATH that
// answers its n-th call with answers[n-1] (output, then exit code), and
// returns the script's output, its exit code and how often go was called.
func fuzzOne(t *testing.T, answers ...string) (string, int, int) {
	t.Helper()
	bin := t.TempDir()
	for i, a := range answers {
		if err := os.WriteFile(filepath.Join(bin, "answer"+strconv.Itoa(i+1)), []byte(a), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fake := `#!/usr/bin/env bash
d="$(dirname "$0")"
n=$(( $(cat "$d/calls" 2>/dev/null || echo 0) + 1 ))
echo "$n" >"$d/calls"
[ -f "$d/answer$n" ] || { echo "unexpected call $n: $*"; exit 3; }
sed '$d' "$d/answer$n"
exit "$(tail -n 1 "$d/answer$n")"
`
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(stackScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", abs, "fuzz-one", t.TempDir(), "threatview/collector", "FuzzDecode")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "FUZZTIME=5s")
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(filepath.Join(bin, "calls"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(calls)))
	return string(out), code, n
}

const passed = "PASS\nok  \tthreatview/collector\t5.1s\n0"

// failLines are the lines a test log counts as failures.
func failLines(out string) []string {
	var fails []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "--- FAIL") {
			fails = append(fails, l)
		}
	}
	return fails
}

func TestFuzzOne_RaceThenPassIsAPass(t *testing.T) {
	out, code, calls := fuzzOne(t, coordinatorRace+"1", passed)
	if code != 0 || calls != 2 {
		t.Fatalf("exit %d after %d runs, want 0 after 2:\n%s", code, calls, out)
	}
	if f := failLines(out); len(f) != 0 {
		t.Fatalf("the raced run's failure lines reach the test log: %q\n%s", f, out)
	}
	if !strings.Contains(out, "    | --- FAIL: FuzzDecode") || !strings.Contains(out, "go.dev/issue/75804") {
		t.Fatalf("the raced run is not shown, or not explained:\n%s", out)
	}
}

func TestFuzzOne_RaceTwiceFails(t *testing.T) {
	out, code, calls := fuzzOne(t, coordinatorRace+"1", coordinatorRace+"1")
	if code == 0 || calls != 2 {
		t.Fatalf("exit %d after %d runs, want a failure after 2:\n%s", code, calls, out)
	}
	if len(failLines(out)) == 0 {
		t.Fatalf("the second race's failure is not in the output:\n%s", out)
	}
}

func TestFuzzOne_FindingIsNotRunAgain(t *testing.T) {
	finding := "--- FAIL: FuzzDecode (0.31s)\n    --- FAIL: FuzzDecode (0.00s)\n        decode_test.go:40: boom\n\n" +
		"    Failing input written to testdata/fuzz/FuzzDecode/5c2f\nFAIL\nexit status 1\nFAIL\tthreatview/collector\t0.330s\n1"
	out, code, calls := fuzzOne(t, finding, passed)
	if code == 0 || calls != 1 {
		t.Fatalf("exit %d after %d runs, want a failure after 1:\n%s", code, calls, out)
	}
	if !strings.Contains(out, "Failing input written to") {
		t.Fatalf("the finding is not in the output:\n%s", out)
	}
}
