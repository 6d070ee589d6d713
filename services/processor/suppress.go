package processor

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/wire"
)

// Subject is a data subject: one device of one app.
type Subject struct {
	AppID    string
	DeviceID string
}

// Suppressions is the set of subjects whose events are dropped before they
// are stored (an erasure's suppression, until an admin lifts it). The set
// is replaced whole by a refresher (Replace); a lookup is one atomic load,
// and with no suppression at all the hot path does nothing else.
type Suppressions struct {
	set     atomic.Pointer[map[Subject]struct{}]
	dropped prometheus.Counter
}

// NewSuppressions returns an empty set whose drops are counted in dropped
// (nil: not counted).
func NewSuppressions(dropped prometheus.Counter) *Suppressions {
	return &Suppressions{dropped: dropped}
}

// Replace makes subjects the suppressed set.
func (s *Suppressions) Replace(subjects []Subject) {
	m := make(map[Subject]struct{}, len(subjects))
	for _, x := range subjects {
		m[x] = struct{}{}
	}
	s.set.Store(&m)
}

// Len returns how many subjects are suppressed.
func (s *Suppressions) Len() int {
	if m := s.set.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// Filter returns events without those of suppressed subjects, counting the
// dropped ones. It returns events itself when nothing is dropped.
func (s *Suppressions) Filter(events []wire.Event) []wire.Event {
	m := s.set.Load()
	if m == nil || len(*m) == 0 {
		return events
	}
	var kept []wire.Event
	for i := range events {
		_, drop := (*m)[Subject{events[i].App.ID, events[i].Device.ID}]
		switch {
		case drop && kept == nil:
			kept = append(make([]wire.Event, 0, len(events)), events[:i]...)
		case !drop && kept != nil:
			kept = append(kept, events[i])
		}
		if drop && s.dropped != nil {
			s.dropped.Inc()
		}
	}
	if kept == nil {
		return events
	}
	return kept
}

// Suppressing returns a Store that drops the events of sup's subjects and
// writes the rest with store. A request left without events is not
// written (its message is still acked: its events were dropped on purpose).
func Suppressing(store Store, sup *Suppressions) Store {
	return suppressing{store, sup}
}

type suppressing struct {
	Store
	sup *Suppressions
}

func (s suppressing) WriteBatch(ctx context.Context, events []wire.Event) (WriteResult, error) {
	events = s.sup.Filter(events)
	if len(events) == 0 {
		return WriteResult{}, nil
	}
	return s.Store.WriteBatch(ctx, events)
}

func (s suppressing) WriteRequests(ctx context.Context, requests [][]wire.Event) (WriteResult, map[int]error, error) {
	if s.sup.Len() == 0 {
		return s.Store.WriteRequests(ctx, requests)
	}
	kept := make([][]wire.Event, 0, len(requests))
	index := make([]int, 0, len(requests)) // kept position → caller's position
	for i, r := range requests {
		if r = s.sup.Filter(r); len(r) > 0 {
			kept = append(kept, r)
			index = append(index, i)
		}
	}
	if len(kept) == 0 {
		return WriteResult{}, nil, nil
	}
	res, refused, err := s.Store.WriteRequests(ctx, kept)
	if len(refused) == 0 {
		return res, refused, err
	}
	out := make(map[int]error, len(refused))
	for k, e := range refused {
		out[index[k]] = e
	}
	return res, out, err
}
