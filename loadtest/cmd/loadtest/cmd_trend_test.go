package main

import (
	"testing"
	"time"
)

func TestJudgeTrend(t *testing.T) {
	ms := time.Millisecond
	prev := []TrendRecord{{Held: []float64{2000, 3000}}, {Held: []float64{3000, 3000}}}
	tests := []struct {
		name string
		rec  TrendRecord
		grid float64
		want int
	}{
		{"OK", TrendRecord{Held: []float64{3000, 2000}, P95At105: []time.Duration{6 * ms, 7 * ms}}, 1000, 0},
		{"Stall", TrendRecord{Held: []float64{3000}, P95At105: []time.Duration{59 * ms}}, 1000, 1},
		{"Regression", TrendRecord{Held: []float64{1000, 1000}, P95At105: []time.Duration{6 * ms}}, 500, 1},
		{"WithinNoise", TrendRecord{Held: []float64{2000, 2000}, P95At105: []time.Duration{6 * ms}}, 1000, 0},
		{"No105", TrendRecord{Held: []float64{3000}}, 1000, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgeTrend(tc.rec, prev, tc.grid); len(got) != tc.want {
				t.Errorf("judgeTrend(%+v) = %q, want %d problems", tc.rec, got, tc.want)
			}
		})
	}
}
