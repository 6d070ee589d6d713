package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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

// ParseMetrics reads the Prometheus text exposition format with
// prometheus/common's parser and flattens it into samples as the text
// shows them: a summary or histogram family gives its _sum and _count
// samples and one sample per quantile or bucket (le). Malformed input is
// an error.
func ParseMetrics(r io.Reader) ([]Sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []Sample
	for _, name := range names {
		for _, m := range families[name].GetMetric() {
			labels := make(map[string]string, len(m.GetLabel())+1)
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			add := func(suffix string, v float64, extra ...string) {
				ls := labels
				if len(extra) == 2 {
					ls = maps.Clone(labels)
					ls[extra[0]] = extra[1]
				}
				out = append(out, Sample{Name: name + suffix, Labels: ls, Value: v})
			}
			switch {
			case m.Counter != nil:
				add("", m.GetCounter().GetValue())
			case m.Gauge != nil:
				add("", m.GetGauge().GetValue())
			case m.Untyped != nil:
				add("", m.GetUntyped().GetValue())
			case m.Summary != nil:
				for _, q := range m.GetSummary().GetQuantile() {
					add("", q.GetValue(), model.QuantileLabel, strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64))
				}
				add("_sum", m.GetSummary().GetSampleSum())
				add("_count", float64(m.GetSummary().GetSampleCount()))
			case m.Histogram != nil:
				for _, b := range m.GetHistogram().GetBucket() {
					add("_bucket", float64(b.GetCumulativeCount()), model.BucketLabel, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				add("_sum", m.GetHistogram().GetSampleSum())
				add("_count", float64(m.GetHistogram().GetSampleCount()))
			}
		}
	}
	return out, nil
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
