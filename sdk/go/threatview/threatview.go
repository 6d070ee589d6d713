// Package threatview is the Go client of the Threat View collector
// (POST /v1/events). It gets delivery right so an app does not have to:
//
//   - every event gets an event_id (UUIDv7) before it is queued, so a
//     retried request never stores an event twice;
//   - events are batched under the collector's limits (at most 500 events,
//     1 MiB and 32 KiB an event) and sent gzipped;
//   - 429, 5xx and network errors are retried with exponential backoff and
//     jitter, never sooner than the collector's Retry-After; other 4xx
//     answers are never retried: the events they name are reported to
//     Config.OnDrop (when the collector names one bad event of a batch,
//     only that event is dropped and the others are sent again);
//   - the queue is bounded in memory, or kept on disk (Config.SpoolDir) so
//     that queued events survive a restart of the process;
//   - Close flushes; Stats exposes the client's counters.
//
// A Client is safe for concurrent use.
package threatview

import (
	"encoding/json"
	"errors"
	"time"
)

// Limits of the collector's public contract. The client keeps under them.
const (
	// MaxBatchEvents is the most events the collector takes in one request.
	MaxBatchEvents = 500
	// MaxRequestBytes is the largest request body, after decompression.
	MaxRequestBytes = 1 << 20
	// MaxEventBytes is the largest event, as the collector measures it.
	MaxEventBytes = 32 << 10
)

// sentAtRoom is what `"sent_at":"<RFC 3339 nano>",` adds to an event.
const sentAtRoom = len(`"sent_at":"2006-01-02T15:04:05.000000000Z",`)

// Errors returned by Send, SendRaw, Flush and Close.
var (
	// ErrClosed means the client was closed.
	ErrClosed = errors.New("threatview: client closed")
	// ErrQueueFull means TrySend found no room in the queue.
	ErrQueueFull = errors.New("threatview: queue full")
	// ErrInvalidEvent means an event lacks what the collector requires
	// (type, app.id) or is not a JSON object.
	ErrInvalidEvent = errors.New("threatview: invalid event")
	// ErrEventTooLarge means an event is over MaxEventBytes once encoded.
	ErrEventTooLarge = errors.New("threatview: event too large")
	// ErrUndelivered means Close returned before every event was resolved:
	// without a spool those events were dropped (and reported to OnDrop);
	// with a spool they wait on disk for the next client on that directory.
	ErrUndelivered = errors.New("threatview: events not delivered")
)

// Event is one event as the collector's contract defines it. EventID is
// set by Send when empty; sent_at is added by the client at every attempt
// (it lets the collector correct the device's clock skew).
type Event struct {
	EventID    string    `json:"event_id,omitempty"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at,omitzero"`
	App        App       `json:"app"`
	Device     Device    `json:"device,omitzero"`
	// Session groups the events of one app run (an id of at most 128 bytes).
	Session *Session `json:"session,omitempty"`
	// User is the app's user; the collector pseudonymises the id (a keyed
	// hash) before anything keeps it.
	User *User `json:"user,omitempty"`
	// Location is where the device was; the collector coarsens it to its
	// grid (0.1° by default) before anything keeps it.
	Location   *Location      `json:"location,omitempty"`
	Threats    []any          `json:"threats,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// App identifies the sending application; ID must be the token's app.
type App struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
}

// Device describes the device an event comes from.
type Device struct {
	ID           string `json:"id,omitempty"`
	Model        string `json:"model,omitempty"`
	Manufacturer string `json:"manufacturer,omitempty"`
	OS           string `json:"os,omitempty"`
	OSVersion    string `json:"os_version,omitempty"`
	// Language is a BCP 47 tag (en-GB), at most 35 bytes.
	Language string `json:"language,omitempty"`
}

// Session is the app run an event belongs to.
type Session struct {
	ID string `json:"id"`
}

// User is the app's user; ID is a string of at most 256 bytes, never stored
// as sent.
type User struct {
	ID string `json:"id"`
}

// Location is a position in degrees; AccuracyM (metres) is optional.
type Location struct {
	Lat       float64  `json:"lat"`
	Lon       float64  `json:"lon"`
	AccuracyM *float64 `json:"accuracy_m,omitempty"`
}

// Threat is a threat seen, in its object form (a bare string is the other
// form the collector accepts).
type Threat struct {
	Type string `json:"type"`
}

// DropReason says why events were dropped.
type DropReason string

// Reasons for dropping events.
const (
	// DropRejected: the collector refused them with a 4xx other than 429
	// (Status, Code and Message say why). Never retried.
	DropRejected DropReason = "rejected"
	// DropRetriesExhausted: Config.MaxAttempts attempts failed.
	DropRetriesExhausted DropReason = "retries_exhausted"
	// DropClosed: Close ended before they were delivered and there is no
	// spool. Their outcome may be unknown (a request was in flight).
	DropClosed DropReason = "closed"
	// DropSpoolError: a spool line (or a whole spool file) could not be
	// read; Err names the file and line, and Events is empty (the line is
	// not an event). The rest of the file is still sent.
	DropSpoolError DropReason = "spool_error"
)

// Drop reports events the client had to give up on.
type Drop struct {
	Reason DropReason
	// Events are the dropped events as they were queued (JSON objects,
	// without sent_at), so they can be kept elsewhere.
	Events []json.RawMessage
	// EventIDs are their event ids, in the same order.
	EventIDs []string
	// Status is the HTTP status of the last answer, 0 when there was none.
	Status int
	// Code and Message are the collector's error body, when there was one.
	Code    string
	Message string
	// RequestID is the collector's X-Request-ID of the last answer.
	RequestID string
	// Err is the last transport error, if any.
	Err error
}

// Stats are the client's counters since New.
type Stats struct {
	Queued    uint64 // events taken by Send, TrySend or SendRaw
	Delivered uint64 // events the collector accepted (202)
	Dropped   uint64 // events reported to OnDrop
	Requests  uint64 // HTTP requests sent, retries included
	Retries   uint64 // requests that failed and were retried (429, 5xx, network)
	Throttled uint64 // 429 answers
	// Pending is the events queued and not yet delivered or dropped
	// (events recovered from the spool included).
	Pending int64
	// SpoolBytes is the size of the spool's files (0 without a spool).
	SpoolBytes int64
	// LastError describes the last failed attempt ("" before any).
	LastError string
}
