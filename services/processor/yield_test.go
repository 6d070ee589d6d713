package processor

import (
	"context"
	"testing"
	"time"

	"threatview/platform/wire"
)

type nopStore struct{ Store }

func (nopStore) WriteBatch(_ context.Context, events []wire.Event) (WriteResult, error) {
	return WriteResult{Stored: len(events)}, nil
}

// TestYield checks the drain's pacing: unpaced while the CPU is free, half
// the rate it wrote at once the pressure passes High (at most a halving a
// second, never below MinRate), and back up once it falls below Low.
func TestYield(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	pressure := 0.0
	var slept time.Duration
	y := &Yield{High: 0.4, Low: 0.2, MinRate: 1000,
		pressure: func() (float64, error) { return pressure, nil },
		sleep:    func(_ context.Context, d time.Duration) error { slept += d; clock = clock.Add(d); return nil },
		now:      func() time.Time { return clock },
	}
	s := Yielding(nopStore{}, y)
	batch := make([]wire.Event, 2000)
	write := func() time.Duration {
		slept = 0
		clock = clock.Add(100 * time.Millisecond) // each write takes 100 ms: 20,000 events/s
		if err := y.after(context.Background(), len(batch), 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		return slept
	}
	if _, err := s.WriteBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if d := write(); d != 0 {
		t.Fatalf("paused %s with the CPU free, want 0", d)
	}
	pressure = 0.7
	// 20,000 events/s halved: 2,000 events take 200 ms, 100 ms of pause.
	if d := write(); d != 100*time.Millisecond {
		t.Fatalf("first busy batch paused %s, want 100ms", d)
	}
	for range 20 {
		write()
	}
	if y.rate != y.MinRate {
		t.Fatalf("rate after 20 busy batches = %.0f, want the floor %.0f", y.rate, y.MinRate)
	}
	if d := write(); d != 1900*time.Millisecond {
		t.Fatalf("batch at the floor paused %s, want 1.9s (2,000 events at 1,000/s)", d)
	}
	pressure = 0.1
	for range 300 {
		write()
	}
	if y.rate != 0 {
		t.Fatalf("rate after 300 free batches = %.0f, want unpaced", y.rate)
	}
}

func TestParsePressure(t *testing.T) {
	got, err := parsePressure("some avg10=73.63 avg60=85.80 avg300=91.48 total=3290673339\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	if err != nil || got < 0.7363 || got > 0.7364 {
		t.Fatalf("parsePressure = %v, %v, want 0.7363", got, err)
	}
	if _, err := parsePressure("full avg10=1.00\n"); err == nil {
		t.Fatal("parsePressure without a some line: no error")
	}
}
