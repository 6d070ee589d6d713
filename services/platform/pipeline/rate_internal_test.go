package pipeline

import (
	"testing"
	"time"
)

func TestRateMeter(t *testing.T) {
	var r rateMeter
	now := time.Unix(1_700_000_000, 0)
	if got := r.observe(now); got != 1 {
		t.Fatalf("first event: rate %.2f, want 1", got)
	}
	var got float64
	for i := 0; i < 1000; i++ { // 200 a second for 5 s
		now = now.Add(5 * time.Millisecond)
		got = r.observe(now)
	}
	if got < 190 || got > 210 {
		t.Fatalf("steady 200/s: rate %.1f, want 200 ± 5%%", got)
	}
	now = now.Add(3 * time.Second)
	if got = r.observe(now); got > 12 {
		t.Fatalf("after 3 s of silence: rate %.1f, want at most 200·e⁻³+1 ≈ 11", got)
	}
}

func TestGroupWindow(t *testing.T) {
	g := NewGroup(GroupOptions{Window: 8 * time.Millisecond, FullRate: 500}, nil)
	for _, c := range []struct {
		rate float64
		want time.Duration
	}{{1, 16 * time.Microsecond}, {100, 1600 * time.Microsecond}, {500, 8 * time.Millisecond}, {5000, 8 * time.Millisecond}} {
		if got := g.window(c.rate); got != c.want {
			t.Errorf("window at %.0f/s = %s, want %s", c.rate, got, c.want)
		}
	}
	g.opt.FullRate = 0
	if got := g.window(1); got != 8*time.Millisecond {
		t.Errorf("FullRate 0: window at 1/s = %s, want the whole 8ms", got)
	}
}
