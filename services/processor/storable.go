package processor

import (
	"fmt"
	"time"

	"threatview/platform/wire"
)

// The window of received_at (stamped by the collector's clock) the processor
// stores, relative to its own clock. Outside it the time is not the
// collector's: storing it would create partitions for arbitrary months.
const (
	MaxReceivedAge   = 366 * 24 * time.Hour
	MaxReceivedAhead = 24 * time.Hour
)

// CheckStorable reports, wrapping ErrUnstorable, why e can never be stored
// even though its envelope is valid: a value Postgres refuses
// (wire.Event.Storable), or a received_at outside [now-MaxReceivedAge,
// now+MaxReceivedAhead], which is not a collector's clock. Retrying such an
// event would block the queue forever, so its message is dead-lettered.
func CheckStorable(e *wire.Event, now time.Time) error {
	if e.ReceivedAt.Before(now.Add(-MaxReceivedAge)) || e.ReceivedAt.After(now.Add(MaxReceivedAhead)) {
		return fmt.Errorf("%w: received_at %s is outside the stored window", ErrUnstorable, e.ReceivedAt.Format(time.RFC3339))
	}
	if err := e.Storable(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnstorable, err)
	}
	return nil
}
