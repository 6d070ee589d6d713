package publish_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"threatview/collector"
	"threatview/collector/publish"
)

// The Group's own errors (no free slot in time) reach the API as
// collector.ErrUnavailable, so they become 503.
func TestNew_ErrTimeout(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	g := publish.New(publish.Options{Concurrency: 1, Timeout: 100 * time.Millisecond},
		func(context.Context, []byte, int) error { entered <- struct{}{}; <-gate; return nil })
	a := g.Add([]byte("1"), 1)
	<-entered // a holds the only slot
	if err := g.Add([]byte("2"), 1).Wait(); !errors.Is(err, publish.ErrTimeout) || !errors.Is(err, collector.ErrUnavailable) {
		t.Fatalf("Wait = %v, want ErrTimeout wrapping collector.ErrUnavailable", err)
	}
	close(gate)
	if err := a.Wait(); err != nil {
		t.Fatalf("held send = %v", err)
	}
}

func TestNewPaired(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		var body, aux string
		var items, auxItems int
		g := publish.NewPaired(publish.Options{Prefix: "[", AuxPrefix: "{", Suffix: "]", Window: 20 * time.Millisecond},
			func(_ context.Context, b []byte, n int, a []byte, an int) error {
				body, items, aux, auxItems = string(b), n, string(a), an
				return nil
			})
		t1 := g.AddPair([]byte(`1,2`), 2, []byte(`"a"`))
		t2 := g.AddPair([]byte(`3`), 1, nil)
		for _, tk := range []publish.Ticket{t1, t2} {
			if err := tk.Wait(); err != nil {
				t.Fatalf("Wait = %v", err)
			}
		}
		if body != "[1,2,3]" || items != 3 || aux != `{"a"]` || auxItems != 1 {
			t.Fatalf("sent (%q, %d, %q, %d), want (\"[1,2,3]\", 3, `{\"a\"]`, 1)", body, items, aux, auxItems)
		}
	})
	t.Run("UnpairedGroup", func(t *testing.T) {
		g := publish.New(publish.Options{AuxPrefix: "{"}, func(context.Context, []byte, int) error { return nil })
		if err := g.AddPair([]byte(`1`), 1, []byte(`"a"`)).Wait(); err == nil {
			t.Fatalf("AddPair on New's group = nil, want an error (nothing would keep the pair)")
		}
	})
}
