package collector

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"threatview/platform/wire"
)

// AppendEvent appends the JSON of ev to b: the same document encoding/json
// writes for wire.Event (field order, omitempty, RFC 3339 times), without
// reflection, because encoding every accepted event is on the hot path.
// Threats and Attributes are copied as they are; they must be valid JSON
// (Decode guarantees it).
func AppendEvent(b []byte, ev *wire.Event) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, ev.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, ev.Type)
	b = append(b, `,"received_at":`...)
	b = appendTime(b, ev.ReceivedAt)
	b = append(b, `,"occurred_at":`...)
	b = appendTime(b, ev.OccurredAt)
	if ev.OriginalOccurredAt != nil {
		b = append(b, `,"original_occurred_at":`...)
		b = appendTime(b, *ev.OriginalOccurredAt)
	}
	if ev.SentAt != nil {
		b = append(b, `,"sent_at":`...)
		b = appendTime(b, *ev.SentAt)
	}
	b = append(b, `,"app":{"id":`...)
	b = appendString(b, ev.App.ID)
	b = appendOpt(b, `,"version":`, ev.App.Version)
	b = append(b, `},"device":{`...)
	n := len(b)
	b = appendOpt(b, `,"id":`, ev.Device.ID)
	b = appendOpt(b, `,"model":`, ev.Device.Model)
	b = appendOpt(b, `,"manufacturer":`, ev.Device.Manufacturer)
	b = appendOpt(b, `,"os":`, ev.Device.OS)
	b = appendOpt(b, `,"os_version":`, ev.Device.OSVersion)
	b = appendOpt(b, `,"language":`, ev.Device.Language)
	if len(b) > n {
		// Drop the comma before the first device field.
		copy(b[n:], b[n+1:])
		b = b[:len(b)-1]
	}
	b = append(b, '}')
	if ev.Session != nil {
		b = append(b, `,"session":{"id":`...)
		b = appendString(b, ev.Session.ID)
		b = append(b, '}')
	}
	if ev.User != nil {
		b = append(b, `,"user":{"pseudonym":`...)
		b = appendString(b, ev.User.Pseudonym)
		b = append(b, '}')
	}
	if ev.Location != nil {
		b = append(b, `,"location":{"lat":`...)
		b = appendFloat(b, ev.Location.Lat)
		b = append(b, `,"lon":`...)
		b = appendFloat(b, ev.Location.Lon)
		b = append(b, '}')
	}
	b = append(b, `,"country":`...)
	b = appendString(b, ev.Country)
	b = appendOpt(b, `,"client_ip":`, ev.ClientIP)
	b = appendOpt(b, `,"token_id":`, ev.TokenID)
	b = appendOpt(b, `,"request_id":`, ev.RequestID)
	if len(ev.Threats) > 0 {
		b = append(b, `,"threats":`...)
		b = append(b, ev.Threats...)
	}
	if len(ev.Attributes) > 0 {
		b = append(b, `,"attributes":`...)
		b = append(b, ev.Attributes...)
	}
	return append(b, '}')
}

// appendFloat appends f the way encoding/json writes a float64 (finite:
// wire.Event's validation and the collector's range checks see to it).
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		n := len(b)
		b = strconv.AppendFloat(b, f, 'e', -1, 64)
		// clean up e-09 to e-9, as encoding/json does
		if m := len(b) - n; m >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
		return b
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

func appendOpt(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, key...)
	return appendString(b, v)
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does with
// HTML escaping off: control characters escaped, invalid UTF-8 replaced by
// U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
