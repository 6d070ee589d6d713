package collector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"threatview/platform/wire"
)

// Input is one event as an app posts it. Times stay strings until
// validation so that a bad one is reported with its field name.
type Input struct {
	Type       string          `json:"type"`
	OccurredAt string          `json:"occurred_at"`
	SentAt     string          `json:"sent_at"`
	EventID    string          `json:"event_id"`
	App        wire.App        `json:"app"`
	Device     wire.Device     `json:"device"`
	Session    *SessionInput   `json:"session"`
	User       *UserInput      `json:"user"`
	Location   *LocationInput  `json:"location"`
	Threats    json.RawMessage `json:"threats"`
	Attributes json.RawMessage `json:"attributes"`

	occurredAt time.Time
	sentAt     time.Time
}

// body is a request: either one event, or {"events": [...]}.
type body struct {
	Events []json.RawMessage `json:"events"`
	Input
}

// Field length limits (bytes).
const (
	maxTypeLen  = 64
	maxIDLen    = 128
	maxTextLen  = 256
	rfc3339Like = "RFC 3339 (e.g. 2026-01-02T15:04:05Z)"
)

// Decode parses a request body (already decompressed and at most
// MaxRequestBytes) into its events, all validated. It returns an error
// wrapping ErrMalformed (not JSON), ErrTooLarge (an event over
// MaxEventBytes or more than MaxBatchEvents events) or ErrInvalid (a field
// missing, unknown, of the wrong type or format), the last two usually as a
// *FieldError naming the event index and field. Index is -1 for a body that
// is a single event.
func Decode(data []byte) ([]Input, error) {
	// A body no larger than one event cannot hold an event over the limit,
	// so it is decoded in one pass. Anything that fails there is decoded
	// again the careful way, which names the event and field (and refuses
	// invalid UTF-8, which encoding/json would turn into U+FFFD silently).
	if len(data) <= MaxEventBytes && utf8.Valid(data) {
		if in, ok := decodeFast(data); ok {
			return in, nil
		}
	}
	return decodeCareful(data)
}

// fastBody is body with the events decoded in the same pass.
type fastBody struct {
	Events []Input `json:"events"`
	Input
}

// decodeFast decodes and validates data in one pass; ok is false on any
// problem, which decodeCareful then reports.
func decodeFast(data []byte) ([]Input, bool) {
	var b fastBody
	if err := strictUnmarshal(data, &b); err != nil {
		return nil, false
	}
	if b.Events == nil {
		in := b.Input
		if in.validate(-1) != nil {
			return nil, false
		}
		return []Input{in}, true
	}
	if b.Input.setField() != "" || len(b.Events) == 0 || len(b.Events) > MaxBatchEvents {
		return nil, false
	}
	for i := range b.Events {
		if b.Events[i].validate(i) != nil {
			return nil, false
		}
	}
	return b.Events, true
}

// decodeCareful decodes the envelope first and then each event on its own,
// so that errors carry the event index and per-event sizes are exact.
func decodeCareful(data []byte) ([]Input, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: the body is not valid UTF-8", ErrMalformed)
	}
	var b body
	if err := strictUnmarshal(data, &b); err != nil {
		return nil, jsonError(err, -1)
	}
	if b.Events == nil {
		if len(data) > MaxEventBytes {
			return nil, &FieldError{Index: -1, Field: "", Message: fmt.Sprintf("event is larger than %d bytes", MaxEventBytes), Err: ErrTooLarge}
		}
		in := b.Input
		if err := in.validate(-1); err != nil {
			return nil, err
		}
		return []Input{in}, nil
	}
	if f := b.Input.setField(); f != "" {
		return nil, &FieldError{Index: -1, Field: f, Message: "event fields are not allowed beside \"events\"", Err: ErrInvalid}
	}
	switch n := len(b.Events); {
	case n == 0:
		return nil, &FieldError{Index: -1, Field: "events", Message: "is empty", Err: ErrInvalid}
	case n > MaxBatchEvents:
		return nil, &FieldError{Index: -1, Field: "events", Message: fmt.Sprintf("has %d events, at most %d are allowed", n, MaxBatchEvents), Err: ErrTooLarge}
	}
	out := make([]Input, len(b.Events))
	for i, raw := range b.Events {
		if len(raw) > MaxEventBytes {
			return nil, &FieldError{Index: i, Field: "", Message: fmt.Sprintf("event is larger than %d bytes", MaxEventBytes), Err: ErrTooLarge}
		}
		if len(raw) == 0 || raw[0] != '{' {
			return nil, &FieldError{Index: i, Field: "", Message: "event must be a JSON object", Err: ErrInvalid}
		}
		if err := strictUnmarshal(raw, &out[i]); err != nil {
			return nil, jsonError(err, i)
		}
		if err := out[i].validate(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// strictUnmarshal decodes one JSON value rejecting unknown fields and
// trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &json.SyntaxError{Offset: dec.InputOffset()}
	}
	return nil
}

// jsonError turns an encoding/json error into ErrMalformed or a *FieldError.
func jsonError(err error, index int) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			if index < 0 {
				return fmt.Errorf("%w: body must be a JSON object", ErrMalformed)
			}
			return &FieldError{Index: index, Message: "event must be a JSON object", Err: ErrInvalid}
		}
		field := strings.TrimPrefix(typeErr.Field, "Input.")
		return &FieldError{Index: index, Field: field, Message: "must be " + jsonKind(typeErr.Type.Kind().String()), Err: ErrInvalid}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &FieldError{Index: index, Field: name, Message: "unknown field", Err: ErrInvalid}
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty body", ErrMalformed)
	default:
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice":
		return "an array"
	default:
		return "a " + k
	}
}

// setField names one event field that is set, or "".
func (in *Input) setField() string {
	switch {
	case in.Type != "":
		return "type"
	case in.OccurredAt != "":
		return "occurred_at"
	case in.SentAt != "":
		return "sent_at"
	case in.EventID != "":
		return "event_id"
	case in.App != wire.App{}:
		return "app"
	case in.Device != wire.Device{}:
		return "device"
	case in.Session != nil:
		return "session"
	case in.User != nil:
		return "user"
	case in.Location != nil:
		return "location"
	case in.Threats != nil:
		return "threats"
	case in.Attributes != nil:
		return "attributes"
	}
	return ""
}

func (in *Input) validate(i int) error {
	bad := func(field, msg string) error {
		return &FieldError{Index: i, Field: field, Message: msg, Err: ErrInvalid}
	}
	switch {
	case in.Type == "":
		return bad("type", "is required")
	case len(in.Type) > maxTypeLen:
		return bad("type", fmt.Sprintf("is longer than %d bytes", maxTypeLen))
	case in.App.ID == "":
		return bad("app.id", "is required")
	case len(in.App.ID) > maxIDLen:
		return bad("app.id", fmt.Sprintf("is longer than %d bytes", maxIDLen))
	case len(in.EventID) > 0 && !wire.IsUUID(in.EventID):
		return bad("event_id", "must be a UUID (8-4-4-4-12 hex)")
	case !isJSONKind(in.Threats, '['):
		return bad("threats", "must be an array")
	case !isJSONKind(in.Attributes, '{'):
		return bad("attributes", "must be an object")
	}
	for _, f := range [...]struct{ name, v string }{
		{"app.version", in.App.Version},
		{"device.id", in.Device.ID},
		{"device.model", in.Device.Model},
		{"device.manufacturer", in.Device.Manufacturer},
		{"device.os", in.Device.OS},
		{"device.os_version", in.Device.OSVersion},
	} {
		if len(f.v) > maxTextLen {
			return bad(f.name, fmt.Sprintf("is longer than %d bytes", maxTextLen))
		}
	}
	if field, msg := in.checkInvestigation(); field != "" {
		return bad(field, msg)
	}
	if in.OccurredAt != "" {
		t, err := time.Parse(time.RFC3339Nano, in.OccurredAt)
		if err != nil {
			return bad("occurred_at", "must be "+rfc3339Like)
		}
		if !InTimeRange(t) {
			return bad("occurred_at", timeRangeMsg)
		}
		in.occurredAt = t.UTC()
	}
	if in.SentAt != "" {
		t, err := time.Parse(time.RFC3339Nano, in.SentAt)
		if err != nil {
			return bad("sent_at", "must be "+rfc3339Like)
		}
		if !InTimeRange(t) {
			return bad("sent_at", timeRangeMsg)
		}
		in.sentAt = t.UTC()
	}
	// Nesting is checked before anything parses threats further: the
	// envelope adds levels, and a document nested close to encoding/json's
	// limit here would not decode there.
	if nestingExceeds(in.Threats, MaxNesting) {
		return bad("threats", fmt.Sprintf("nests deeper than %d levels", MaxNesting))
	}
	if nestingExceeds(in.Attributes, MaxNesting) {
		return bad("attributes", fmt.Sprintf("nests deeper than %d levels", MaxNesting))
	}
	if k, ok := badThreat(in.Threats); !ok {
		return bad(fmt.Sprintf("threats[%d]", k), `must be a string or an object with a "type" string`)
	}
	if in.EventID != "" {
		in.EventID = strings.ToLower(in.EventID)
	}
	if isNull(in.Threats) {
		in.Threats = nil
	}
	if isNull(in.Attributes) {
		in.Attributes = nil
	}
	// Refuse here what Postgres would refuse later (a NUL, an unpaired
	// surrogate escape, a number beyond numeric): a 202 must never end in
	// the dead-letter queue.
	probe := wire.Event{Type: in.Type, App: in.App, Device: in.Device, Threats: in.Threats, Attributes: in.Attributes}
	if in.Session != nil {
		probe.Session = &wire.Session{ID: in.Session.ID}
	}
	var se *wire.StorableError
	if err := probe.Storable(); errors.As(err, &se) {
		return bad(se.Field, se.Reason)
	}
	return nil
}

// isJSONKind reports whether raw is absent, null, or starts with open.
func isJSONKind(raw json.RawMessage, open byte) bool {
	return len(raw) == 0 || isNull(raw) || raw[0] == open
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// The rules that make every accepted event decodable and storable by the
// processor (DESIGN.md, "Public contract").
const (
	// MaxNesting is how deep threats and attributes may nest: arrays and
	// objects, the outer one included (`[]` is 1 level).
	MaxNesting   = 32
	timeRangeMsg = "must lie between 1970-01-01 and 9999-12-31"
)

// Bounds of every time of an event, before and after skew correction: the
// envelope writes times as RFC 3339, which has four-digit years only, and
// nothing before the epoch is a real device clock.
var (
	MinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// InTimeRange reports whether t lies within [MinTime, MaxTime].
func InTimeRange(t time.Time) bool {
	return !t.Before(MinTime) && !t.After(MaxTime)
}

// nestingExceeds reports whether the valid JSON raw nests arrays and
// objects more than limit levels deep.
func nestingExceeds(raw []byte, limit int) bool {
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth++; depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// badThreat checks that every element of the threats array is a string or
// an object whose "type" (the last one, as jsonb keeps it) is a string. It
// returns the index of the first that is not.
func badThreat(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 || isNull(raw) {
		return 0, true
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, false
	}
	for k, t := range list {
		switch t[0] {
		case '"':
			continue
		case '{':
			var obj map[string]json.RawMessage
			if json.Unmarshal(t, &obj) == nil && len(obj["type"]) > 0 && obj["type"][0] == '"' {
				continue
			}
		}
		return k, false
	}
	return 0, true
}
