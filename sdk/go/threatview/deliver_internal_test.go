package threatview

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"-1", 0},
		{"soon", 0},
		{"86400", maxRetryAfter},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := &Client{cfg: Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}}
	for _, tc := range []struct {
		failures   int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 0, 100 * time.Millisecond, 200 * time.Millisecond},
		{4, 0, 400 * time.Millisecond, 800 * time.Millisecond},
		{10, 0, time.Second, 2 * time.Second},
		{50, 0, time.Second, 2 * time.Second},
		{1, 3 * time.Second, 3 * time.Second, 3301 * time.Millisecond}, // Retry-After plus up to a tenth
	} {
		for range 200 {
			if got := c.backoff(tc.failures, tc.retryAfter); got < tc.lo || got > tc.hi {
				t.Fatalf("backoff(%d, %v) = %v, want within [%v, %v]", tc.failures, tc.retryAfter, got, tc.lo, tc.hi)
			}
		}
	}
}
