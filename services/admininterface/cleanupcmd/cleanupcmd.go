// Package cleanupcmd runs the retention service's cleanup command with
// --dry-run and reads what it would drop from its log lines. The admin
// interface never imports another service, so this is how the retention
// page shows the next cleanup: the command's own answer, with the cleanup
// CronJob's configuration in the environment.
package cleanupcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// Line is one log line of the run.
type Line struct {
	Level string
	Msg   string
	Attrs []Attr
}

// Attr is one key/value of a log line.
type Attr struct{ Key, Value string }

// Result is one dry run.
type Result struct {
	Lines    []Line
	Err      string // why the command failed; blank when it exited 0
	Duration time.Duration
}

// skipped are keys every line carries or that repeat the configuration.
var skipped = map[string]bool{"time": true, "level": true, "msg": true, "service": true, "version": true, "config": true}

// DryRun runs command (its first word is the program) with --dry-run and
// env, for at most timeout.
func DryRun(ctx context.Context, command []string, env []string, timeout time.Duration) Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append(append([]string(nil), command[1:]...), "--dry-run")
	cmd := exec.CommandContext(ctx, command[0], args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res := Result{Lines: Parse(out.Bytes()), Duration: time.Since(start)}
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		var ee *exec.ExitError
		if !errors.As(err, &ee) || msg == "" {
			msg = err.Error()
		}
		if len(msg) > 1000 {
			msg = msg[:1000]
		}
		res.Err = msg
	}
	return res
}

// Parse reads slog JSON lines; a line that is not JSON is kept as its text.
func Parse(out []byte) []Line {
	var lines []Line
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			lines = append(lines, Line{Msg: string(raw)})
			continue
		}
		l := Line{Level: fmt.Sprint(m["level"]), Msg: fmt.Sprint(m["msg"])}
		keys := make([]string, 0, len(m))
		for k := range m {
			if !skipped[k] {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := m[k]
			s, ok := v.(string)
			if !ok {
				b, _ := json.Marshal(v)
				s = string(b)
			}
			l.Attrs = append(l.Attrs, Attr{Key: k, Value: s})
		}
		lines = append(lines, l)
	}
	return lines
}
