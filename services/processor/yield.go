package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/wire"
)

// Yield paces the writes while the machine's CPU is contended, so a drain
// leaves the cores to live traffic (the collector's answers) first. After
// each batch it reads the CPU pressure (Linux PSI: the share of time some
// task waited for a CPU, averaged over 10 s); above High it halves its
// rate (at most once a second, never below MinRate, so a backlog always
// drains), below Low it raises it by a tenth a second until the pace no
// longer binds (unpaced again). A
// batch then takes at least its events / rate: the processor sleeps for
// the rest. The cost is drain time, only while the box is busy.
type Yield struct {
	High, Low float64 // pressure thresholds, 0..1
	MinRate   float64 // events/s, the floor

	pressure func() (float64, error)
	sleep    func(context.Context, time.Duration) error
	now      func() time.Time
	gauge    prometheus.Gauge

	mu      sync.Mutex
	rate    float64 // events/s; 0: unpaced
	changed time.Time
}

// NewYield returns a Yield reading /proc/pressure/cpu, reporting its rate
// (0: unpaced) in gauge (nil: not reported).
func NewYield(high, low, minRate float64, gauge prometheus.Gauge) *Yield {
	return &Yield{High: high, Low: low, MinRate: minRate, pressure: cpuPressure, sleep: sleepCtx, now: time.Now, gauge: gauge}
}

// after paces a batch of n events that took took to write.
func (y *Yield) after(ctx context.Context, n int, took time.Duration) error {
	p, err := y.pressure()
	if err != nil {
		return nil // no pressure to read (not Linux, no PSI): never pace
	}
	y.mu.Lock()
	now := y.now()
	switch {
	case p > y.High && now.Sub(y.changed) >= time.Second:
		if y.rate == 0 { // start from what the writes just did
			y.rate = float64(n) / max(took.Seconds(), 1e-3)
		}
		y.rate = max(y.rate/2, y.MinRate)
		y.changed = now
	case p < y.Low && y.rate > 0 && now.Sub(y.changed) >= time.Second:
		y.rate *= 1.1
		y.changed = now
		if float64(n)/y.rate <= took.Seconds() { // the pace no longer binds
			y.rate = 0
		}
	}
	rate := y.rate
	y.mu.Unlock()
	if y.gauge != nil {
		y.gauge.Set(rate)
	}
	if rate == 0 {
		return nil
	}
	if wait := time.Duration(float64(n)/rate*float64(time.Second)) - took; wait > 0 {
		return y.sleep(ctx, wait)
	}
	return nil
}

// Yielding returns a Store whose writes y paces (WriteRequests, the rare
// slow path, is not paced).
func Yielding(store Store, y *Yield) Store { return yielding{store, y} }

type yielding struct {
	Store
	y *Yield
}

func (s yielding) WriteBatch(ctx context.Context, events []wire.Event) (WriteResult, error) {
	start := s.y.now()
	res, err := s.Store.WriteBatch(ctx, events)
	if err == nil {
		// A cancelled pause only ends the wait: the batch is stored.
		_ = s.y.after(ctx, len(events), s.y.now().Sub(start))
	}
	return res, err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cpuPressure reads "some avg10" of /proc/pressure/cpu as a fraction.
func cpuPressure() (float64, error) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, err
	}
	return parsePressure(string(b))
}

func parsePressure(s string) (float64, error) {
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "avg10="); ok {
				p, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("cpu pressure %q: %w", v, err)
				}
				return p / 100, nil
			}
		}
	}
	return 0, errors.New("no \"some avg10\" in cpu pressure")
}
