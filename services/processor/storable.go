package processor

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

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
// even though its envelope is valid: Postgres text rejects NUL bytes, jsonb
// rejects invalid UTF-8, the escape \u0000 and numbers beyond numeric's
// range (1e200000, which JSON allows), and a received_at outside
// [now-MaxReceivedAge, now+MaxReceivedAhead] is not a collector's clock.
// Retrying such an event would block the queue forever, so its message is
// dead-lettered instead.
func CheckStorable(e *wire.Event, now time.Time) error {
	if e.ReceivedAt.Before(now.Add(-MaxReceivedAge)) || e.ReceivedAt.After(now.Add(MaxReceivedAhead)) {
		return fmt.Errorf("%w: received_at %s is outside the stored window", ErrUnstorable, e.ReceivedAt.Format(time.RFC3339))
	}
	for _, f := range [...]struct{ name, v string }{
		{"id", e.ID}, {"type", e.Type}, {"app.id", e.App.ID}, {"app.version", e.App.Version},
		{"device.id", e.Device.ID}, {"device.model", e.Device.Model},
		{"device.manufacturer", e.Device.Manufacturer}, {"device.os", e.Device.OS},
		{"device.os_version", e.Device.OSVersion}, {"country", e.Country},
		{"token_id", e.TokenID}, {"request_id", e.RequestID},
	} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%w: %s contains a NUL character", ErrUnstorable, f.name)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrUnstorable, f.name)
		}
	}
	if err := checkJSON("threats", e.Threats); err != nil {
		return err
	}
	return checkJSON("attributes", e.Attributes)
}

func checkJSON(name string, raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	if !utf8.Valid(raw) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrUnstorable, name)
	}
	nul, num := scanJSON(raw)
	if nul {
		return fmt.Errorf("%w: %s contains the escape \\u0000", ErrUnstorable, name)
	}
	if num != nil {
		if len(num) > 40 {
			num = num[:40]
		}
		return fmt.Errorf("%w: %s holds the number %s..., beyond what jsonb stores", ErrUnstorable, name, num)
	}
	return nil
}

// scanJSON walks valid JSON and reports an escape \u0000 inside a string, or
// the first number outside the range of Postgres numeric (which jsonb uses).
func scanJSON(raw []byte) (nulEscape bool, badNumber []byte) {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					if i+5 < len(raw) && raw[i+1] == 'u' && string(raw[i+2:i+6]) == "0000" {
						return true, nil
					}
					i++ // skip the escaped character
				}
			}
			i++
		case c == '-' || '0' <= c && c <= '9':
			j := i
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			if !numericFits(raw[i:j]) {
				return false, raw[i:j]
			}
			i = j
		default:
			i++
		}
	}
	return false, nil
}

// Postgres numeric holds at most this many digits before and after the
// decimal point (NUMERIC_WEIGHT_MAX and NUMERIC_DSCALE_MAX).
const (
	numericMaxIntDigits  = 131072
	numericMaxFracDigits = 16383
)

// numericFits reports whether the JSON number n parses as a Postgres numeric:
// the digits after the point as written (trailing zeros count) and the
// digits before it once the exponent is applied must both fit.
func numericFits(n []byte) bool {
	if len(n) > 0 && n[0] == '-' {
		n = n[1:]
	}
	end := len(n)
	for k, c := range n {
		if c == '.' || c == 'e' || c == 'E' {
			end = k
			break
		}
	}
	intPart, rest := n[:end], n[end:]
	var frac []byte
	if len(rest) > 0 && rest[0] == '.' {
		k := 1
		for k < len(rest) && rest[k] != 'e' && rest[k] != 'E' {
			k++
		}
		frac, rest = rest[1:k], rest[k:]
	}
	exp := 0
	if len(rest) > 0 { // e or E, sign, digits
		digits := rest[1:]
		neg := false
		if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
			neg = digits[0] == '-'
			digits = digits[1:]
		}
		if len(digits) > 9 {
			return false
		}
		for _, c := range digits {
			exp = exp*10 + int(c-'0')
		}
		if neg {
			exp = -exp
		}
	}
	if len(frac)-exp > numericMaxFracDigits {
		return false
	}
	first := -1 // first non-zero digit of intPart+frac
	for k, c := range intPart {
		if c != '0' {
			first = k
			break
		}
	}
	if first < 0 {
		for k, c := range frac {
			if c != '0' {
				first = len(intPart) + k
				break
			}
		}
	}
	if first < 0 {
		return true // zero
	}
	return len(intPart)+exp-first <= numericMaxIntDigits
}
