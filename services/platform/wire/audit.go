package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AuditRecord is one audited action. ID is its idempotency key: a record
// delivered twice is stored once.
type AuditRecord struct {
	ID         string    `json:"id"`
	Time       time.Time `json:"time"`
	ActorToken string    `json:"actor_token_id,omitempty"`
	ActorApp   string    `json:"actor_app_id,omitempty"`
	Action     string    `json:"action"`
	Resource   string    `json:"resource,omitempty"`
	Outcome    int       `json:"outcome"`
	ClientIP   string    `json:"client_ip,omitempty"`
	UserAgent  string    `json:"user_agent,omitempty"`
	RequestID  string    `json:"request_id,omitempty"`
	EventCount int       `json:"event_count"`
	BodySHA256 string    `json:"body_sha256,omitempty"`
	Body       []byte    `json:"body,omitempty"`
}

// AuditBatch is the body of one message on AuditQueue and of a POST to the
// audit logger.
type AuditBatch struct {
	V       int           `json:"v"`
	Records []AuditRecord `json:"records"`
}

// Framing of an AuditBatch written by hand (group commit): AuditPrefix,
// the records (AuditRecord objects) joined by commas, AuditSuffix.
const (
	AuditPrefix = `{"v":1,"records":[`
	AuditSuffix = `]}`
)

// Validate checks one record; the error names the field.
func (r AuditRecord) Validate() error {
	switch {
	case !IsUUID(r.ID):
		return fmt.Errorf("id %q is not a UUID", r.ID)
	case r.Time.IsZero():
		return errors.New("time is missing")
	case r.Action == "":
		return errors.New("action is empty")
	case len(r.Action) > 64:
		return errors.New("action is longer than 64 bytes")
	case r.Outcome < 100 || r.Outcome > 599:
		return fmt.Errorf("outcome %d is not an HTTP status", r.Outcome)
	case r.EventCount < 0:
		return errors.New("event_count is negative")
	}
	return nil
}

// DecodeAuditBatch parses and checks a message body. Any error wraps
// ErrInvalidEnvelope.
func DecodeAuditBatch(body []byte) (AuditBatch, error) {
	var b AuditBatch
	if err := json.Unmarshal(body, &b); err != nil {
		return AuditBatch{}, fmt.Errorf("%w: decode: %v", ErrInvalidEnvelope, err)
	}
	if b.V != Version {
		return AuditBatch{}, fmt.Errorf("%w: version %d, want %d", ErrInvalidEnvelope, b.V, Version)
	}
	if len(b.Records) == 0 {
		return AuditBatch{}, fmt.Errorf("%w: no records", ErrInvalidEnvelope)
	}
	for i, r := range b.Records {
		if err := r.Validate(); err != nil {
			return AuditBatch{}, fmt.Errorf("%w: record %d: %v", ErrInvalidEnvelope, i, err)
		}
	}
	return b, nil
}

// AuditItem is one record of an audit message, decoded and checked on its
// own.
type AuditItem struct {
	Record AuditRecord
	// Raw is the record's JSON as the message carried it.
	Raw json.RawMessage
	// Err says why the record breaks the envelope's rules (nil when it
	// does not); it wraps ErrInvalidEnvelope.
	Err error
}

// DecodeAuditItems parses a message body into its records, each decoded and
// checked on its own, so that one bad record spoils only itself. The error,
// wrapping ErrInvalidEnvelope, is for a body that is not an audit batch.
func DecodeAuditItems(body []byte) ([]AuditItem, error) {
	var head struct {
		V       int               `json:"v"`
		Records []json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrInvalidEnvelope, err)
	}
	if head.V != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrInvalidEnvelope, head.V, Version)
	}
	if len(head.Records) == 0 {
		return nil, fmt.Errorf("%w: no records", ErrInvalidEnvelope)
	}
	items := make([]AuditItem, len(head.Records))
	for i, raw := range head.Records {
		it := &items[i]
		it.Raw = raw
		if err := json.Unmarshal(raw, &it.Record); err != nil {
			it.Err = fmt.Errorf("%w: record %d: decode: %v", ErrInvalidEnvelope, i, err)
		} else if err := it.Record.Validate(); err != nil {
			it.Err = fmt.Errorf("%w: record %d: %v", ErrInvalidEnvelope, i, err)
		}
	}
	return items, nil
}

// AuditBody returns a message body holding raw (one record's JSON) alone:
// what the dead-letter queue keeps of a bad record.
func AuditBody(raw []byte) []byte {
	b := make([]byte, 0, len(AuditPrefix)+len(raw)+len(AuditSuffix))
	b = append(b, AuditPrefix...)
	b = append(b, raw...)
	return append(b, AuditSuffix...)
}
