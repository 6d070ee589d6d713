package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EventsVersion is the envelope version the collector writes on EventsQueue.
// Version 2 groups the events by the request that brought them, so that a
// consumer can set one request aside without touching the others that
// share its message. Version 1 (a flat list of events) is still decoded:
// messages written before an upgrade may wait in the queue.
const EventsVersion = 2

// Framing of a version-2 message: EventsPrefix, the requests joined by
// commas, EventsSuffix; each request is RequestPrefix, its events (Event
// objects) joined by commas, RequestSuffix:
//
//	{"v":2,"requests":[{"events":[{...},{...}]},{"events":[{...}]}]}
const (
	EventsPrefix  = `{"v":2,"requests":[`
	EventsSuffix  = `]}`
	RequestPrefix = `{"events":[`
	RequestSuffix = `]}`
	// eventsPrefixV1 frames a version-1 message: {"v":1,"events":[...]}.
	eventsPrefixV1 = `{"v":1,"events":[`
)

// Request is the events one collector request brought, as one message
// carried them.
type Request struct {
	// Events are the request's events, each valid; nil when Err is set.
	Events []Event
	// Err says why the request can never be processed; it wraps
	// ErrInvalidEnvelope. The other requests of the message are unaffected.
	Err error
	// RequestID and AppID name the request when they could be read, for
	// logs (blank otherwise).
	RequestID, AppID string

	v   int
	raw []byte // v2: the request object; v1: its events joined by commas
}

// Body returns a message body holding this request alone, in the version it
// arrived in: what the dead-letter queue keeps of it.
func (r *Request) Body() []byte {
	if r.v == 1 {
		return frame(eventsPrefixV1, r.raw, "]}")
	}
	return frame(EventsPrefix, r.raw, EventsSuffix)
}

// Size is the number of bytes the request takes in its message.
func (r *Request) Size() int { return len(r.raw) }

func frame(prefix string, raw []byte, suffix string) []byte {
	b := make([]byte, 0, len(prefix)+len(raw)+len(suffix))
	b = append(b, prefix...)
	b = append(b, raw...)
	return append(b, suffix...)
}

// DecodeEvents splits a message body into its requests and decodes and
// checks each on its own, so that a request that breaks the envelope's
// rules spoils only itself (its Err is set). In version 1 a request is a run
// of consecutive events with the same request_id. The error, wrapping
// ErrInvalidEnvelope, is for a body that cannot be split at all.
func DecodeEvents(body []byte) ([]Request, error) {
	if bytes.HasPrefix(body, []byte(EventsPrefix)) && bytes.HasSuffix(body, []byte(EventsSuffix)) &&
		len(body) >= len(EventsPrefix)+len(EventsSuffix) {
		// The collector's framing, split without a JSON parser: encoding/json
		// refuses a whole document nested too deep, and one request must not
		// be able to spoil the others that way.
		parts := splitTop(body[len(EventsPrefix) : len(body)-len(EventsSuffix)])
		if len(parts) == 0 {
			return nil, fmt.Errorf("%w: no requests", ErrInvalidEnvelope)
		}
		out := make([]Request, len(parts))
		for i, p := range parts {
			out[i] = decodeRequestV2(p)
		}
		return out, nil
	}
	var head struct {
		V        int               `json:"v"`
		Events   []json.RawMessage `json:"events"`
		Requests []json.RawMessage `json:"requests"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrInvalidEnvelope, err)
	}
	switch head.V {
	case 1:
		if len(head.Events) == 0 {
			return nil, fmt.Errorf("%w: no events", ErrInvalidEnvelope)
		}
		return decodeV1(head.Events), nil
	case EventsVersion:
		if len(head.Requests) == 0 {
			return nil, fmt.Errorf("%w: no requests", ErrInvalidEnvelope)
		}
		out := make([]Request, len(head.Requests))
		for i, p := range head.Requests {
			out[i] = decodeRequestV2(p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: version %d, want 1 or %d", ErrInvalidEnvelope, head.V, EventsVersion)
}

// decodeRequestV2 decodes one request object of a version-2 message.
func decodeRequestV2(raw []byte) Request {
	r := Request{v: EventsVersion, raw: raw}
	var req struct {
		Events []Event `json:"events"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		r.Err = fmt.Errorf("%w: decode request: %v", ErrInvalidEnvelope, err)
		r.RequestID, r.AppID = names(raw)
		return r
	}
	if len(req.Events) == 0 {
		r.Err = fmt.Errorf("%w: request without events", ErrInvalidEnvelope)
		return r
	}
	r.RequestID, r.AppID = req.Events[0].RequestID, req.Events[0].App.ID
	for i := range req.Events {
		if err := req.Events[i].validate(); err != nil {
			r.Err = fmt.Errorf("%w: event %d: %v", ErrInvalidEnvelope, i, err)
			return r
		}
	}
	r.Events = req.Events
	return r
}

// names reads the request id and app of a request that does not decode,
// best effort.
func names(raw []byte) (requestID, appID string) {
	var n struct {
		Events []struct {
			RequestID string `json:"request_id"`
			App       struct {
				ID string `json:"id"`
			} `json:"app"`
		} `json:"events"`
	}
	if json.Unmarshal(raw, &n) == nil && len(n.Events) > 0 {
		return n.Events[0].RequestID, n.Events[0].App.ID
	}
	return "", ""
}

// decodeV1 groups the events of a version-1 message into requests.
func decodeV1(raws []json.RawMessage) []Request {
	type one struct {
		ev  Event
		err error
		rid string
		raw []byte
	}
	all := make([]one, len(raws))
	for i, raw := range raws {
		o := &all[i]
		o.raw = raw
		if err := json.Unmarshal(raw, &o.ev); err != nil {
			o.err = fmt.Errorf("%w: event %d: decode: %v", ErrInvalidEnvelope, i, err)
			var n struct {
				RequestID string `json:"request_id"`
			}
			if json.Unmarshal(raw, &n) == nil {
				o.rid = n.RequestID
			}
			continue
		}
		o.rid = o.ev.RequestID
		if err := o.ev.validate(); err != nil {
			o.err = fmt.Errorf("%w: event %d: %v", ErrInvalidEnvelope, i, err)
		}
	}
	var out []Request
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[i].rid != "" && all[j].rid == all[i].rid {
			j++
		}
		r := Request{v: 1, RequestID: all[i].rid, AppID: all[i].ev.App.ID}
		var raw []byte
		for k := i; k < j; k++ {
			if k > i {
				raw = append(raw, ',')
			}
			raw = append(raw, all[k].raw...)
			if all[k].err != nil && r.Err == nil {
				r.Err = all[k].err
			}
		}
		r.raw = raw
		if r.Err == nil {
			r.Events = make([]Event, 0, j-i)
			for k := i; k < j; k++ {
				r.Events = append(r.Events, all[k].ev)
			}
		}
		out = append(out, r)
		i = j
	}
	return out
}

// splitTop splits b at the commas outside every string, array and object.
// Malformed input still splits somewhere; the pieces then fail to decode.
func splitTop(b []byte) [][]byte {
	var parts [][]byte
	depth, start := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, bytes.TrimSpace(b[start:i]))
				start = i + 1
			}
		}
	}
	if last := bytes.TrimSpace(b[start:]); len(last) > 0 || len(parts) > 0 {
		parts = append(parts, last)
	}
	return parts
}
