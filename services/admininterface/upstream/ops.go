package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"threatview/admininterface"
)

// Readiness is one service's answer to GET /readyz.
type Readiness struct {
	Ready   bool
	Failed  map[string]string // dependency → error, from the 503 body
	Latency time.Duration
	Err     string // set when the service did not answer at all
}

// Probe asks the service for /readyz with a 2 s timeout.
func (c *Client) Probe(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/readyz", nil)
	if err != nil {
		return Readiness{Err: err.Error()}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Readiness{Err: "no answer", Latency: time.Since(start)}
	}
	defer resp.Body.Close()
	var body struct {
		Failed map[string]string `json:"failed"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	return Readiness{Ready: resp.StatusCode == http.StatusOK, Failed: body.Failed, Latency: time.Since(start)}
}

// Sample is one line of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics reads the service's /metrics (Prometheus text format).
func (c *Client) Metrics(ctx context.Context) ([]Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s/metrics: %v", admininterface.ErrUnavailable, c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s/metrics answered %d", admininterface.ErrUnavailable, c.BaseURL, resp.StatusCode)
	}
	return ParseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// ParseMetrics reads the Prometheus text exposition format (comments are
// skipped; a line that does not parse is an error).
func ParseMetrics(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLine(line string) (Sample, error) {
	var s Sample
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return s, fmt.Errorf("no value in %.80q", line)
	} else {
		s.Name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		s.Labels = map[string]string{}
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad labels in %.80q", line)
			}
			name := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[i])
					}
					continue
				}
				if c == '"' {
					rest = rest[i+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value in %.80q", line)
			}
			s.Labels[name] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value in %.80q", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value in %.80q", line)
	}
	s.Value = v
	return s, nil
}

// Sum adds the values of every sample named name whose labels include all
// of match; found is false when no sample matched.
func Sum(samples []Sample, name string, match map[string]string) (total float64, found bool) {
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
			found = true
		}
	}
	return total, found
}

// Version returns the version label of the first *_build_info sample, or "".
func Version(samples []Sample) string {
	for _, s := range samples {
		if strings.HasSuffix(s.Name, "_build_info") && s.Labels["version"] != "" {
			return s.Labels["version"]
		}
	}
	return ""
}
