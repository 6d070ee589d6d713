package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"threatview/collector"
	"threatview/platform/wire"
)

// idempotencyNamespace is the UUIDv5 namespace of event ids derived from an
// Idempotency-Key (a fixed random UUID; changing it would make retries
// across a deploy store twice).
var idempotencyNamespace = uuid.MustParse("6f1c1c43-6a55-4d0e-9a39-3f3bb0d5c1e2")

// maxIdempotencyKey is the longest Idempotency-Key accepted.
const maxIdempotencyKey = 128

// applyIdempotencyKey gives every event of a request that carries an
// Idempotency-Key, and has no event_id of its own, an id derived from the
// app, the key and the event's position in the request (a UUIDv5). A retry
// of the same request with the same key therefore carries the same ids, and
// the processor stores each event once however many attempts were kept:
// this is the rule for a request whose outcome was unknown (a 503 after a
// receipt that never came). Events with an event_id keep it.
func applyIdempotencyKey(r *http.Request, app string, inputs []collector.Input, events []wire.Event) error {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return nil
	}
	key := vals[0]
	if len(vals) > 1 || key == "" || len(key) > maxIdempotencyKey || !isToken(key) {
		return fmt.Errorf("%w: Idempotency-Key must be one value of 1 to %d characters from A-Z a-z 0-9 - _ . :", collector.ErrInvalid, maxIdempotencyKey)
	}
	for i := range events {
		if inputs[i].EventID != "" {
			continue
		}
		events[i].ID = DeriveEventID(app, key, i).String()
	}
	return nil
}

// DeriveEventID is the id the collector gives the event at index i of a
// request from app with Idempotency-Key key, when the event has no
// event_id.
func DeriveEventID(app, key string, i int) uuid.UUID {
	return uuid.NewSHA1(idempotencyNamespace, []byte(app+"\n"+key+"\n"+strconv.Itoa(i)))
}
