// Package wire defines the messages services exchange over the broker: the
// batch of enriched events the collector publishes and the processor stores,
// and the audit records the audit logger publishes and its worker stores.
// Producer and consumer share these types so the format is written once.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Destinations on the broker. Each has a dead-letter queue named DLQ.<queue>.
const (
	EventsQueue = "/queue/threatview.events"
	AuditQueue  = "/queue/threatview.audit"
)

// DeadLetter returns the dead-letter destination of a queue destination.
func DeadLetter(dest string) string {
	const prefix = "/queue/"
	if len(dest) > len(prefix) && dest[:len(prefix)] == prefix {
		return prefix + "DLQ." + dest[len(prefix):]
	}
	return "/queue/DLQ." + dest
}

// HeaderDeadLetterReason carries why a message was dead-lettered.
const HeaderDeadLetterReason = "threatview-dlq-reason"

// Version is the version of the audit envelope, and of the events envelope
// before EventsVersion (still decoded).
const Version = 1

// ErrInvalidEnvelope means a message can never be processed: it is
// undecodable or breaks the envelope's rules. Consumers dead-letter it.
var ErrInvalidEnvelope = errors.New("invalid envelope")

// EventBatch is the body of one message on EventsQueue: the events of one or
// more collector requests. The events of one request are never split.
type EventBatch struct {
	V      int     `json:"v"`
	Events []Event `json:"events"`
}

// Event is one accepted, enriched event.
type Event struct {
	ID                 string          `json:"id"`
	Type               string          `json:"type"`
	ReceivedAt         time.Time       `json:"received_at"`
	OccurredAt         time.Time       `json:"occurred_at"`
	OriginalOccurredAt *time.Time      `json:"original_occurred_at,omitempty"`
	SentAt             *time.Time      `json:"sent_at,omitempty"`
	App                App             `json:"app"`
	Device             Device          `json:"device"`
	Session            *Session        `json:"session,omitempty"`
	User               *User           `json:"user,omitempty"`
	Location           *Location       `json:"location,omitempty"`
	Country            string          `json:"country"`
	ClientIP           string          `json:"client_ip,omitempty"`
	TokenID            string          `json:"token_id,omitempty"`
	RequestID          string          `json:"request_id,omitempty"`
	Threats            json.RawMessage `json:"threats,omitempty"`
	Attributes         json.RawMessage `json:"attributes,omitempty"`
}

// App identifies the sending application.
type App struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
}

// Device describes the device the event came from.
type Device struct {
	ID           string `json:"id,omitempty"`
	Model        string `json:"model,omitempty"`
	Manufacturer string `json:"manufacturer,omitempty"`
	OS           string `json:"os,omitempty"`
	OSVersion    string `json:"os_version,omitempty"`
	// Language is the device's language as a BCP 47 tag (en-GB).
	Language string `json:"language,omitempty"`
}

// Session groups the events of one app run; ID is opaque (at most 128
// bytes).
type Session struct {
	ID string `json:"id"`
}

// User is the person using the app, as the collector's keyed hash of the
// id the app sent: "<key id>:<hex>". The raw id never leaves the collector.
type User struct {
	Pseudonym string `json:"pseudonym"`
}

// Location is where the device was, already coarsened by the collector to
// its grid (the cell's south-west corner, in degrees): nothing finer is ever
// published.
type Location struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
}

// DecodeEventBatch parses and checks a message body of either version into
// the flat version-1 shape (V is 1). Any error wraps ErrInvalidEnvelope:
// such a message will never be storable. Consumers that must set one
// request aside without the others use DecodeEvents.
func DecodeEventBatch(body []byte) (EventBatch, error) {
	reqs, err := DecodeEvents(body)
	if err != nil {
		return EventBatch{}, err
	}
	b := EventBatch{V: Version}
	for i := range reqs {
		if reqs[i].Err != nil {
			return EventBatch{}, fmt.Errorf("request %d: %w", i, reqs[i].Err)
		}
		b.Events = append(b.Events, reqs[i].Events...)
	}
	return b, nil
}

func (e Event) validate() error {
	switch {
	case !IsUUID(e.ID):
		return fmt.Errorf("id %q is not a UUID", e.ID)
	case e.Type == "":
		return errors.New("type is empty")
	case e.App.ID == "":
		return errors.New("app.id is empty")
	case e.ReceivedAt.IsZero():
		return errors.New("received_at is missing")
	case e.OccurredAt.IsZero():
		return errors.New("occurred_at is missing")
	case len(e.Country) != 2:
		return fmt.Errorf("country %q is not two letters", e.Country)
	case e.Location != nil && !(e.Location.Lat >= -90 && e.Location.Lat <= 90 && e.Location.Lon >= -180 && e.Location.Lon <= 180):
		return fmt.Errorf("location %v,%v is out of range", e.Location.Lat, e.Location.Lon)
	}
	return nil
}

// IsUUID reports whether s is a UUID in the canonical 8-4-4-4-12 hex form.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
