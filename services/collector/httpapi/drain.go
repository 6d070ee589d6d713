package httpapi

import (
	"errors"
	"io"
	"net/http"
	"time"

	"threatview/collector"
)

// Bounds of drainTooLarge: beyond them the connection is closed unread, as
// before (a client sending more than 8 MiB, or too slowly, is not owed its
// answer).
const (
	maxDrainBytes = 8 << 20
	drainTimeout  = 10 * time.Second
)

// drainTooLarge reads and throws away what is left of a body refused with
// 413, so the client finishes sending and then reads the answer. Without it
// net/http closes the connection with body bytes unread, the kernel answers
// the client's next segments with a reset, and a client that writes its
// whole request before reading sees EPIPE or ECONNRESET instead of the 413
// (and retries the same body forever). The connection is closed after the
// answer either way.
func drainTooLarge(w http.ResponseWriter, r *http.Request, err error) {
	if !errors.Is(err, collector.ErrTooLarge) {
		return
	}
	w.Header().Set("Connection", "close")
	if r.ContentLength > maxDrainBytes {
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.CopyN(io.Discard, r.Body, maxDrainBytes)
}
