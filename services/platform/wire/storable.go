package wire

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// StorableError says which field of an event can never be stored and why.
type StorableError struct {
	Field  string
	Reason string
}

func (e *StorableError) Error() string { return e.Field + " " + e.Reason }

// Storable reports, as a *StorableError, a value of e that Postgres can never
// store: text with a NUL byte or invalid UTF-8, and JSON (threats,
// attributes) with invalid UTF-8, the escape \u0000, an unpaired UTF-16
// surrogate escape, or a number beyond the range of numeric (1e200000, which
// JSON allows). The collector refuses such events with 422 so that a 202
// never ends in the dead-letter queue; the processor checks again, since a
// message that fails here would otherwise be retried forever.
func (e *Event) Storable() error {
	for _, f := range [...]struct{ name, v string }{
		{"id", e.ID}, {"type", e.Type}, {"app.id", e.App.ID}, {"app.version", e.App.Version},
		{"device.id", e.Device.ID}, {"device.model", e.Device.Model},
		{"device.manufacturer", e.Device.Manufacturer}, {"device.os", e.Device.OS},
		{"device.os_version", e.Device.OSVersion}, {"country", e.Country},
		{"client_ip", e.ClientIP}, {"token_id", e.TokenID}, {"request_id", e.RequestID},
		{"device.language", e.Device.Language}, {"session.id", e.SessionID()},
		{"user.pseudonym", e.UserPseudonym()},
	} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return &StorableError{f.name, "contains a NUL character"}
		}
		if !utf8.ValidString(f.v) {
			return &StorableError{f.name, "is not valid UTF-8"}
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
		return &StorableError{name, "is not valid UTF-8"}
	}
	bad, num := scanJSON(raw)
	if bad != "" {
		return &StorableError{name, "contains " + bad}
	}
	if num != nil {
		if len(num) > 40 {
			num = num[:40]
		}
		return &StorableError{name, fmt.Sprintf("holds the number %s..., beyond what jsonb stores", num)}
	}
	return nil
}

// scanJSON walks valid JSON and reports an escape inside a string that
// jsonb refuses (\u0000, or a UTF-16 surrogate escape without its pair), or
// the first number outside the range of Postgres numeric (which jsonb uses).
func scanJSON(raw []byte) (badEscape string, badNumber []byte) {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] != '\\' {
					continue
				}
				if i+5 < len(raw) && raw[i+1] == 'u' {
					u, ok := hex4(raw[i+2 : i+6])
					switch {
					case !ok:
					case u == 0:
						return "the escape \\u0000", nil
					case 0xD800 <= u && u <= 0xDBFF: // high surrogate: a low one must follow
						lo, ok := uint16(0), false
						if i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
							lo, ok = hex4(raw[i+8 : i+12])
						}
						if !ok || lo < 0xDC00 || lo > 0xDFFF {
							return "an unpaired surrogate escape", nil
						}
						i += 6 // the pair's low half
					case 0xDC00 <= u && u <= 0xDFFF:
						return "an unpaired surrogate escape", nil
					}
					i += 5
					continue
				}
				i++ // skip the escaped character
			}
			i++
		case c == '-' || '0' <= c && c <= '9':
			j := i
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			if !numericFits(raw[i:j]) {
				return "", raw[i:j]
			}
			i = j
		default:
			i++
		}
	}
	return "", nil
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

// hex4 parses four hex digits.
func hex4(b []byte) (uint16, bool) {
	var v uint16
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uint16(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uint16(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v<<4 | uint16(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
