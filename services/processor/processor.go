// Package processor stores the events the collector publishes: it consumes
// wire.EventBatch messages, writes each batch of events exactly once into the
// monthly-partitioned events table together with their facts in one
// transaction, together with the hourly, daily and monthly rollups they add
// to, and acks the messages only after the commit.
//
// Subpackages: postgres (the Store and the leader lock)
// and cmd/processor (wiring). Batching deliveries, dead-lettering, retrying
// and the leader loop are platform/pipeline's; Handler is the processor's
// part of them.
package processor

import (
	"context"
	"errors"

	"threatview/platform/wire"
)

// ErrUnavailable wraps every database failure: transient by definition, so
// a batch that meets it is retried, never dead-lettered.
var ErrUnavailable = errors.New("events database unavailable")

// ErrUnstorable means an event can never be stored (for example a NUL
// character, which Postgres text and jsonb reject). Its message is
// dead-lettered.
var ErrUnstorable = errors.New("event cannot be stored")

// WriteResult tells what one WriteBatch did.
type WriteResult struct {
	Stored     int // events inserted now
	Duplicates int // events skipped: repeated in the batch or already stored
}

// Store writes batches of events.
type Store interface {
	// WriteBatch stores events and their facts in one transaction, skipping
	// events already stored (see the postgres package for how far back).
	// When it returns nil the batch is durable. Errors wrap ErrUnstorable
	// when the rows themselves cause the failure (a data exception, an
	// integrity violation, a program limit such as max_stack_depth:
	// retrying cannot help) and ErrUnavailable otherwise (transient:
	// connection loss, serialization failure, lock timeout).
	WriteBatch(ctx context.Context, events []wire.Event) (WriteResult, error)
	// WriteRequests stores requests (the events of each collector request)
	// in one transaction, except those whose rows the database refuses:
	// refused maps their indexes to errors wrapping ErrUnstorable, and
	// every other request is durable when it returns. The error wraps
	// ErrUnavailable and means nothing was stored.
	WriteRequests(ctx context.Context, requests [][]wire.Event) (res WriteResult, refused map[int]error, err error)
}
