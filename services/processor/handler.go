package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"threatview/platform/pipeline"
	"threatview/platform/wire"
)

// Handler is the processor's part of the shared consumer
// (platform/pipeline): each collector request of a message is one part,
// dead-lettered alone when its envelope is bad ("envelope"), when an event
// fails CheckStorable ("unstorable") or when Postgres refuses its rows
// ("refused"); the events of every other request are written in one
// transaction by store.
func Handler(store Store) pipeline.Handler[wire.Event] {
	return pipeline.Handler[wire.Event]{
		Decode: decode,
		Write: func(ctx context.Context, events []wire.Event) (pipeline.Result, error) {
			res, err := store.WriteBatch(ctx, events)
			return pipeline.Result(res), err
		},
		Permanent: func(err error) bool { return errors.Is(err, ErrUnstorable) },
		WriteParts: func(ctx context.Context, requests [][]wire.Event) (pipeline.Result, map[int]error, error) {
			res, refused, err := store.WriteRequests(ctx, requests)
			return pipeline.Result(res), refused, err
		},
	}
}

// decode splits a wire.EventBatch message into its requests.
func decode(body []byte) ([]pipeline.Part[wire.Event], []pipeline.Reject, error) {
	reqs, err := wire.DecodeEvents(body)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	parts := make([]pipeline.Part[wire.Event], 0, len(reqs))
	var rejects []pipeline.Reject
	for i := range reqs {
		r := &reqs[i]
		attrs := []any{"request_id", r.RequestID, "app_id", r.AppID, "events", len(r.Events)}
		kind, err := "envelope", r.Err
		for k := 0; err == nil && k < len(r.Events); k++ {
			if err = CheckStorable(&r.Events[k], now); err != nil {
				kind, err = "unstorable", fmt.Errorf("event %d: %w", k, err)
			}
		}
		if err != nil {
			rejects = append(rejects, pipeline.Reject{Body: r.Body(), Kind: kind, Err: err, Attrs: attrs})
			continue
		}
		parts = append(parts, pipeline.Part[wire.Event]{Items: r.Events, Body: r.Body, Attrs: attrs})
	}
	return parts, rejects, nil
}

// Pipeline returns the consumer's metrics (their processor_ names).
func (m *Metrics) Pipeline() pipeline.Metrics {
	return pipeline.Metrics{
		DeadLettered: m.DeadLettered,
		Isolated:     m.Isolated,
		Items:        m.EventsStored,
		Duplicates:   m.Duplicates,
		WriteErrors:  m.WriteErrors,
		AckErrors:    m.AckErrors,
		BatchItems:   m.BatchEvents,
		BatchSeconds: m.BatchSeconds,
	}
}
