package processor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/platform/wire"
	"threatview/processor"
)

// recordingStore keeps what it was asked to write and refuses the requests
// holding an event of device "bad".
type recordingStore struct {
	batches  [][]wire.Event
	requests [][][]wire.Event
}

func (r *recordingStore) WriteBatch(_ context.Context, ev []wire.Event) (processor.WriteResult, error) {
	r.batches = append(r.batches, ev)
	return processor.WriteResult{Stored: len(ev)}, nil
}

func (r *recordingStore) WriteRequests(_ context.Context, reqs [][]wire.Event) (processor.WriteResult, map[int]error, error) {
	r.requests = append(r.requests, reqs)
	refused := map[int]error{}
	n := 0
	for i, req := range reqs {
		for _, e := range req {
			if e.Device.ID == "bad" {
				refused[i] = processor.ErrUnstorable
			}
		}
		if refused[i] == nil {
			n += len(req)
		}
	}
	return processor.WriteResult{Stored: n}, refused, nil
}

func ev(app, dev string) wire.Event {
	var e wire.Event
	e.App.ID, e.Device.ID = app, dev
	return e
}

func TestSuppressing(t *testing.T) {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	sup := processor.NewSuppressions(dropped)
	st := &recordingStore{}
	s := processor.Suppressing(st, sup)
	ctx := context.Background()

	t.Run("OK nothing suppressed", func(t *testing.T) {
		in := []wire.Event{ev("a", "d1"), ev("a", "d2")}
		if _, err := s.WriteBatch(ctx, in); err != nil || len(st.batches[0]) != 2 {
			t.Fatalf("WriteBatch = %v, wrote %d, want 2", err, len(st.batches[0]))
		}
	})
	sup.Replace([]processor.Subject{{AppID: "a", DeviceID: "d1"}})
	t.Run("OK batch filtered", func(t *testing.T) {
		in := []wire.Event{ev("a", "d1"), ev("a", "d2"), ev("b", "d1"), ev("a", "d1")}
		if _, err := s.WriteBatch(ctx, in); err != nil {
			t.Fatal(err)
		}
		got := st.batches[len(st.batches)-1]
		if len(got) != 2 || got[0].Device.ID != "d2" || got[1].App.ID != "b" {
			t.Fatalf("wrote %+v, want a/d2 and b/d1 (same device id, other app)", got)
		}
		if v := testutil.ToFloat64(dropped); v != 2 {
			t.Fatalf("dropped = %v, want 2", v)
		}
	})
	t.Run("OK requests filtered, refusals mapped back", func(t *testing.T) {
		reqs := [][]wire.Event{{ev("a", "d1")}, {ev("a", "bad")}, {ev("a", "d1"), ev("a", "d3")}}
		_, refused, err := s.WriteRequests(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		got := st.requests[len(st.requests)-1]
		if len(got) != 2 || len(got[0]) != 1 || got[0][0].Device.ID != "bad" || len(got[1]) != 1 || got[1][0].Device.ID != "d3" {
			t.Fatalf("wrote %+v", got)
		}
		if len(refused) != 1 || !errors.Is(refused[1], processor.ErrUnstorable) {
			t.Fatalf("refused = %v, want request 1 (the caller's index)", refused)
		}
		if v := testutil.ToFloat64(dropped); v != 4 {
			t.Fatalf("dropped = %v, want 4", v)
		}
	})
	t.Run("OK all suppressed writes nothing", func(t *testing.T) {
		n := len(st.requests)
		if _, _, err := s.WriteRequests(ctx, [][]wire.Event{{ev("a", "d1")}}); err != nil || len(st.requests) != n {
			t.Fatalf("WriteRequests = %v, store called %d times, want %d", err, len(st.requests), n)
		}
	})
	t.Run("OK lifted", func(t *testing.T) {
		sup.Replace(nil)
		if got := sup.Filter([]wire.Event{ev("a", "d1")}); len(got) != 1 {
			t.Fatalf("Filter after lift = %d events, want 1", len(got))
		}
	})
}
