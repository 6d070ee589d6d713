// Package stats summarises load-test samples the way JMeter's aggregate
// report does: samples, failures, latency average, extremes and percentiles,
// and throughput over the span the samples cover.
package stats

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sample is one request's outcome.
type Sample struct {
	Start   time.Time
	Latency time.Duration
	OK      bool
}

// Summary is one row of the results table.
type Summary struct {
	Label   string
	Samples int
	Failed  int
	Average time.Duration
	Min     time.Duration
	Max     time.Duration
	Median  time.Duration
	P90     time.Duration
	P95     time.Duration
	P99     time.Duration
	// Span is from the first request's start to the last response's end.
	Span time.Duration
}

// ErrorPct is the share of failed samples in percent.
func (s Summary) ErrorPct() float64 {
	if s.Samples == 0 {
		return 0
	}
	return 100 * float64(s.Failed) / float64(s.Samples)
}

// Throughput is samples per second over the span (JMeter's Transactions/s).
func (s Summary) Throughput() float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.Samples) / s.Span.Seconds()
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value such that at least p percent of the values are
// less than or equal to it. It returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return sorted[rank-1]
}

// Summarize computes the summary of samples. Latency figures cover every
// sample, failed or not, as JMeter's do.
func Summarize(label string, samples []Sample) Summary {
	s := Summary{Label: label, Samples: len(samples)}
	if len(samples) == 0 {
		return s
	}
	lat := make([]time.Duration, len(samples))
	var sum time.Duration
	first, last := samples[0].Start, samples[0].Start.Add(samples[0].Latency)
	for i, x := range samples {
		lat[i] = x.Latency
		sum += x.Latency
		if !x.OK {
			s.Failed++
		}
		if x.Start.Before(first) {
			first = x.Start
		}
		if end := x.Start.Add(x.Latency); end.After(last) {
			last = end
		}
	}
	slices.Sort(lat)
	s.Average = sum / time.Duration(len(lat))
	s.Min, s.Max = lat[0], lat[len(lat)-1]
	s.Median = Percentile(lat, 50)
	s.P90 = Percentile(lat, 90)
	s.P95 = Percentile(lat, 95)
	s.P99 = Percentile(lat, 99)
	s.Span = last.Sub(first)
	return s
}

// Columns of the JMeter-style table.
var Columns = []string{
	"Label", "Samples", "Failed", "Error %", "Average", "Min", "Max",
	"Median", "90th pct", "95th pct", "99th pct", "Transactions/s",
}

// Ms formats a duration in milliseconds with two decimals.
func Ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

func (s Summary) cells() []string {
	return []string{
		s.Label,
		strconv.Itoa(s.Samples),
		strconv.Itoa(s.Failed),
		strconv.FormatFloat(s.ErrorPct(), 'f', 2, 64) + "%",
		Ms(s.Average), Ms(s.Min), Ms(s.Max), Ms(s.Median),
		Ms(s.P90), Ms(s.P95), Ms(s.P99),
		strconv.FormatFloat(s.Throughput(), 'f', 2, 64),
	}
}

// WriteMarkdown writes rows as a Markdown table; latencies are in ms.
func WriteMarkdown(w io.Writer, rows []Summary) error {
	var b strings.Builder
	b.WriteString("| " + strings.Join(Columns, " | ") + " |\n|")
	for i := range Columns {
		if i == 0 {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		c := r.cells()
		for i := range c {
			c[i] = strings.ReplaceAll(c[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(c, " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// CSVHeader and CSVRecord give a row in CSV form (latencies in ms, no units).
func CSVHeader() []string { return Columns }

// CSVRecord returns the CSV cells of s.
func (s Summary) CSVRecord() []string {
	c := s.cells()
	c[3] = strings.TrimSuffix(c[3], "%")
	return c
}

// Text returns a fixed-width text table for terminals.
func Text(rows []Summary) string {
	all := [][]string{Columns}
	for _, r := range rows {
		all = append(all, r.cells())
	}
	width := make([]int, len(Columns))
	for _, row := range all {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, row := range all {
		for i, c := range row {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&b, "  %*s", width[i], c)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
