package stats

import (
	"encoding/csv"
	"strings"
	"testing"
	"time"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestPercentile(t *testing.T) {
	// 1..100 ms: nearest rank gives the p-th value exactly.
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, ms(float64(i)))
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 95, 0},
		{"one", []time.Duration{ms(7)}, 99, ms(7)},
		{"median of 100", hundred, 50, ms(50)},
		{"p90 of 100", hundred, 90, ms(90)},
		{"p95 of 100", hundred, 95, ms(95)},
		{"p99 of 100", hundred, 99, ms(99)},
		{"p100 is max", hundred, 100, ms(100)},
		{"p0 is min", hundred, 0, ms(1)},
		{"median of 4 rounds up the rank", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"p95 of 10 is the 10th", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 95, 10},
		{"p90 of 10 is the 9th", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%d values, %v) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// 10 samples, one per 100 ms, latencies 10..1 ms (unsorted on purpose),
	// two failures.
	var s []Sample
	for i := 0; i < 10; i++ {
		s = append(s, Sample{Start: t0.Add(time.Duration(i) * 100 * time.Millisecond), Latency: ms(float64(10 - i)), OK: i != 3 && i != 7})
	}
	got := Summarize("x", s)
	want := Summary{
		Label: "x", Samples: 10, Failed: 2,
		Average: ms(5.5), Min: ms(1), Max: ms(10), Median: ms(5), P90: ms(9), P95: ms(10), P99: ms(10),
		// first start t0, last end: t0+900ms+1ms
		Span: ms(901),
	}
	if got != want {
		t.Fatalf("Summarize = %+v\nwant        %+v", got, want)
	}
	if got.ErrorPct() != 20 {
		t.Errorf("ErrorPct() = %v, want 20", got.ErrorPct())
	}
	if tp := got.Throughput(); tp < 11.09 || tp > 11.1 {
		t.Errorf("Throughput() = %v, want 10/0.901 s ≈ 11.099", tp)
	}
}

func TestSummarize_Empty(t *testing.T) {
	s := Summarize("none", nil)
	if s.Samples != 0 || s.ErrorPct() != 0 || s.Throughput() != 0 {
		t.Errorf("Summarize(nil) = %+v, want zeros", s)
	}
}

func TestWriteMarkdown(t *testing.T) {
	row := Summary{Label: "Application | startup", Samples: 63000, Failed: 0, Average: ms(4.25), Min: ms(1.5), Max: ms(80),
		Median: ms(3.9), P90: ms(6), P95: ms(7.5), P99: ms(12), Span: 600 * time.Second}
	var b strings.Builder
	if err := WriteMarkdown(&b, []Summary{row}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("WriteMarkdown wrote %d lines, want header, rule and 1 row:\n%s", len(lines), b.String())
	}
	wantRow := `| Application \| startup | 63000 | 0 | 0.00% | 4.25 | 1.50 | 80.00 | 3.90 | 6.00 | 7.50 | 12.00 | 105.00 |`
	if lines[2] != wantRow {
		t.Errorf("row = %s\nwant  %s", lines[2], wantRow)
	}
	if n := strings.Count(lines[1], "|"); n != len(Columns)+1 {
		t.Errorf("rule has %d pipes, want %d", n, len(Columns)+1)
	}
	for _, col := range []string{"Samples", "Failed", "Error %", "Average", "Min", "Max", "Median", "90th pct", "95th pct", "99th pct", "Transactions/s"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %q: %s", col, lines[0])
		}
	}
}

func TestCSVRecord(t *testing.T) {
	row := Summary{Label: "a,b", Samples: 4, Failed: 1, Span: 2 * time.Second}
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write(CSVHeader())
	_ = w.Write(row.CSVRecord())
	w.Flush()
	recs, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatalf("reading back CSV: %v", err)
	}
	if len(recs) != 2 || len(recs[1]) != len(Columns) {
		t.Fatalf("CSV = %q", recs)
	}
	if recs[1][0] != "a,b" || recs[1][3] != "25.00" || recs[1][11] != "2.00" {
		t.Errorf("CSV row = %q, want label a,b, error 25.00, throughput 2.00", recs[1])
	}
}

func TestText(t *testing.T) {
	out := Text([]Summary{{Label: "plan", Samples: 1}})
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) != len(lines[1]) {
		t.Errorf("Text = %q, want two aligned lines", out)
	}
}

func BenchmarkSummarize(b *testing.B) {
	t0 := time.Now()
	s := make([]Sample, 63000)
	for i := range s {
		s[i] = Sample{Start: t0.Add(time.Duration(i) * time.Millisecond), Latency: time.Duration(i*7919%20000) * time.Microsecond, OK: true}
	}
	b.ReportAllocs()
	for b.Loop() {
		Summarize("plan", s)
	}
}
