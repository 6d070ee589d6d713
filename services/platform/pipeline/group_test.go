package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"threatview/platform/pipeline"
)

// recorder is a SendFunc that keeps every message and can be held shut.
type recorder struct {
	mu      sync.Mutex
	msgs    [][]byte
	gate    chan struct{} // when not nil, each send waits for a value
	entered chan struct{} // when not nil, each send signals its start
	deaf    bool          // wait for the gate even past the deadline
	err     error
}

func (r *recorder) send(ctx context.Context, b pipeline.Batch) error {
	if r.entered != nil {
		r.entered <- struct{}{}
	}
	if r.gate != nil && r.deaf {
		<-r.gate
	} else if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, append([]byte(nil), b.Body...))
	return r.err
}

func (r *recorder) messages(t *testing.T) [][]int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]int
	for _, m := range r.msgs {
		var b struct {
			Events []int `json:"events"`
		}
		if err := json.Unmarshal(m, &b); err != nil {
			t.Fatalf("message %s is not JSON: %v", m, err)
		}
		out = append(out, b.Events)
	}
	return out
}

var errDown = errors.New("service unavailable")

func opts() pipeline.GroupOptions {
	return pipeline.GroupOptions{Prefix: `{"events":[`, Suffix: `]}`, Concurrency: 1, Timeout: 5 * time.Second, Unavailable: errDown}
}

func TestGroup_Add(t *testing.T) {
	t.Run("OK coalesces while the slot is busy", func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{}), entered: make(chan struct{}, 10)}
		g := pipeline.NewGroup(opts(), rec.send)
		first := g.Add([]byte("0"), 1)
		<-rec.entered // the first message holds the only slot
		var tickets []pipeline.Ticket
		for i := 1; i <= 10; i++ {
			tickets = append(tickets, g.Add([]byte(fmt.Sprintf("%d,%d", 10*i, 10*i+1)), 2))
		}
		rec.gate <- struct{}{}
		rec.gate <- struct{}{}
		if err := first.Wait(); err != nil {
			t.Fatalf("Wait = %v", err)
		}
		for _, tk := range tickets {
			if err := tk.Wait(); err != nil {
				t.Fatalf("Wait = %v", err)
			}
		}
		msgs := rec.messages(t)
		if len(msgs) != 2 || len(msgs[0]) != 1 || len(msgs[1]) != 20 {
			t.Fatalf("messages = %v, want [0] then all 20 events in one", msgs)
		}
	})
	t.Run("OK caps start a new message without splitting a request", func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{})}
		o := opts()
		o.MaxItems = 5
		g := pipeline.NewGroup(o, rec.send)
		var tickets []pipeline.Ticket
		for i := 0; i < 6; i++ { // 6 requests of 2 items: messages of 2+2, 2+2, 2+2
			tickets = append(tickets, g.Add([]byte(fmt.Sprintf("%d,%d", 2*i, 2*i+1)), 2))
		}
		close(rec.gate)
		for _, tk := range tickets {
			if err := tk.Wait(); err != nil {
				t.Fatalf("Wait = %v", err)
			}
		}
		total := 0
		for _, m := range rec.messages(t) {
			if len(m) > 5 || len(m)%2 != 0 {
				t.Fatalf("message %v breaks the cap or splits a request", m)
			}
			for j := 0; j < len(m); j += 2 {
				if m[j+1] != m[j]+1 || m[j]%2 != 0 {
					t.Fatalf("message %v split a request", m)
				}
			}
			total += len(m)
		}
		if total != 12 {
			t.Fatalf("sent %d events, want 12", total)
		}
	})
	t.Run("OK byte cap", func(t *testing.T) {
		rec := &recorder{}
		o := opts()
		o.MaxBytes = 64
		o.Window = 50 * time.Millisecond
		g := pipeline.NewGroup(o, rec.send)
		for i := 0; i < 20; i++ {
			g.Add([]byte(fmt.Sprint(1000+i)), 1)
		}
		g.Flush()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.msgs) < 2 {
			t.Fatalf("%d messages for 20 requests of 4 bytes under a 64-byte cap, want several", len(rec.msgs))
		}
		for _, m := range rec.msgs {
			if len(m) > 64 {
				t.Fatalf("message %s is %d bytes, cap 64", m, len(m))
			}
		}
	})
	t.Run("ErrSend reaches every request of the message", func(t *testing.T) {
		boom := errors.New("broker down")
		rec := &recorder{gate: make(chan struct{}), entered: make(chan struct{}, 10), err: boom}
		g := pipeline.NewGroup(opts(), rec.send)
		a := g.Add([]byte("1"), 1)
		<-rec.entered
		b := g.Add([]byte("2"), 1)
		c := g.Add([]byte("3"), 1)
		close(rec.gate)
		for _, tk := range []pipeline.Ticket{a, b, c} {
			if err := tk.Wait(); !errors.Is(err, boom) {
				t.Fatalf("Wait = %v, want %v", err, boom)
			}
		}
	})
	t.Run("ErrTimeout waiting for a slot", func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{}), entered: make(chan struct{}, 10), deaf: true}
		o := opts()
		o.Timeout = 100 * time.Millisecond
		g := pipeline.NewGroup(o, rec.send)
		a := g.Add([]byte("1"), 1)
		<-rec.entered // a holds the only slot until the gate opens
		b := g.Add([]byte("2"), 1)
		if err := b.Wait(); !errors.Is(err, pipeline.ErrTimeout) || !errors.Is(err, errDown) {
			t.Fatalf("Wait = %v, want ErrTimeout wrapping the Unavailable error", err)
		}
		close(rec.gate)
		if err := a.Wait(); err != nil {
			t.Fatalf("held send = %v", err)
		}
	})
	t.Run("OK window gathers requests", func(t *testing.T) {
		rec := &recorder{}
		o := opts()
		o.Window = 200 * time.Millisecond
		o.Concurrency = 4
		g := pipeline.NewGroup(o, rec.send)
		addConcurrently(t, g, 20)
		g.Flush()
		msgs := rec.messages(t)
		n := 0
		for _, m := range msgs {
			n += len(m)
		}
		if n != 20 || len(msgs) >= 20 {
			t.Fatalf("%d events in %d messages, want 20 in fewer than 20", n, len(msgs))
		}
	})
}

func TestGroup_Close(t *testing.T) {
	rec := &recorder{}
	o := opts()
	o.Window = time.Hour // only Close sends the open message
	g := pipeline.NewGroup(o, rec.send)
	tk := g.Add([]byte("1"), 1)
	g.Close()
	if err := tk.Wait(); err != nil {
		t.Fatalf("Wait after Close = %v, want the open message sent", err)
	}
	if msgs := rec.messages(t); len(msgs) != 1 || len(msgs[0]) != 1 {
		t.Fatalf("messages = %v, want [[1]]", msgs)
	}
	if err := g.Add([]byte("2"), 1).Wait(); !errors.Is(err, pipeline.ErrClosed) || !errors.Is(err, errDown) {
		t.Fatalf("Add after Close = %v, want ErrClosed wrapping the Unavailable error", err)
	}
}

func TestTicket_WaitContext(t *testing.T) {
	rec := &recorder{gate: make(chan struct{})}
	g := pipeline.NewGroup(opts(), rec.send)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.Add([]byte("1"), 1).WaitContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitContext = %v, want the context's error", err)
	}
	close(rec.gate)
	g.Flush()
}

func TestGroup_AddPair(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		var mu sync.Mutex
		var got pipeline.Batch
		g := pipeline.NewPairedGroup(pipeline.GroupOptions{Prefix: "[", AuxPrefix: "{", Suffix: "]", Window: 20 * time.Millisecond},
			func(_ context.Context, b pipeline.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				got = b
				got.Body, got.Aux = append([]byte(nil), b.Body...), append([]byte(nil), b.Aux...)
				return nil
			})
		t1 := g.AddPair([]byte(`1,2`), 2, []byte(`"a"`))
		t2 := g.AddPair([]byte(`3`), 1, nil)
		t3 := g.AddPair([]byte(`4`), 1, []byte(`"b"`))
		for i, tk := range []pipeline.Ticket{t1, t2, t3} {
			if err := tk.Wait(); err != nil {
				t.Fatalf("Wait(%d) = %v", i, err)
			}
		}
		if string(got.Body) != "[1,2,3,4]" || got.Items != 4 || string(got.Aux) != `{"a","b"]` || got.AuxItems != 2 || got.Requests != 3 {
			t.Fatalf("sent %+v, want body [1,2,3,4] with 4 items, aux {\"a\",\"b\"] with 2, 3 requests", got)
		}
	})
	t.Run("NoAux", func(t *testing.T) {
		aux := []byte("unset")
		g := pipeline.NewPairedGroup(pipeline.GroupOptions{Prefix: "[", AuxPrefix: "{", Suffix: "]"},
			func(_ context.Context, b pipeline.Batch) error { aux = b.Aux; return nil })
		if err := g.Add([]byte(`1`), 1).Wait(); err != nil || aux != nil {
			t.Fatalf("Add = %v with aux %q, want nil with no paired message", err, aux)
		}
	})
	t.Run("UnpairedGroup", func(t *testing.T) {
		g := pipeline.NewGroup(pipeline.GroupOptions{}, func(context.Context, pipeline.Batch) error { return nil })
		if err := g.AddPair([]byte(`1`), 1, []byte(`"a"`)).Wait(); err == nil {
			t.Fatalf("AddPair on an unpaired group = nil, want an error (nothing would keep the pair)")
		}
	})
}

func BenchmarkGroup(b *testing.B) {
	g := pipeline.NewGroup(pipeline.GroupOptions{Prefix: `{"events":[`, Suffix: `]}`, Concurrency: 4},
		func(context.Context, pipeline.Batch) error { return nil })
	frag := []byte(`{"id":"0190f0a8-1234-7abc-8def-0123456789ab","type":"app.startup"}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.Add(frag, 1).Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestGroup_FullRate(t *testing.T) {
	t.Run("OK a quiet group does not wait the whole window", func(t *testing.T) {
		rec := &recorder{}
		o := opts()
		o.Window = 10 * time.Second
		o.FullRate = 1000 // one request in a second: a thousandth of the window
		g := pipeline.NewGroup(o, rec.send)
		start := time.Now()
		if err := g.Add([]byte("1"), 1).Wait(); err != nil {
			t.Fatalf("Wait = %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a lone request waited %s, want about Window/FullRate (10 ms)", d)
		}
	})
	t.Run("OK a busy group waits the whole window", func(t *testing.T) {
		rec := &recorder{}
		o := opts()
		o.Window = 300 * time.Millisecond
		o.FullRate = 20
		o.Concurrency = 4
		g := pipeline.NewGroup(o, rec.send)
		addConcurrently(t, g, 100) // a burst: about 100 requests a second from here on
		start := time.Now()
		if err := g.Add([]byte("100"), 1).Wait(); err != nil {
			t.Fatalf("Wait = %v", err)
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Fatalf("a request after a burst above FullRate waited %s, want the whole window (300 ms)", d)
		}
		g.Flush()
	})
}

// addConcurrently adds the items 0..n-1 from n goroutines at once and waits
// for every one's outcome.
func addConcurrently(t *testing.T, g *pipeline.Group, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Add([]byte(fmt.Sprint(i)), 1).Wait(); err != nil {
				t.Errorf("Wait = %v", err)
			}
		}()
	}
	wg.Wait()
}
