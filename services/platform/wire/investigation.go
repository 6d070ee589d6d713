package wire

import (
	"strconv"
	"strings"
)

// SessionID returns the event's session id, or "".
func (e *Event) SessionID() string {
	if e.Session == nil {
		return ""
	}
	return e.Session.ID
}

// UserPseudonym returns the event's user pseudonym, or "".
func (e *Event) UserPseudonym() string {
	if e.User == nil {
		return ""
	}
	return e.User.Pseudonym
}

// ParseOSVersion reads the major and minor numbers at the start of an OS
// version ("14", "17.5.1", "10.0.22631", "14 (Upside Down Cake)"); ok is
// false when it does not start with a number. A missing minor is 0. Numbers
// beyond 32767 (a smallint) are not versions anyone draws: ok is false.
func ParseOSVersion(v string) (major, minor int, ok bool) {
	v = strings.TrimSpace(v)
	num := func(s string) (int, string, bool) {
		i := 0
		for i < len(s) && i < 6 && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, s, false
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || n > 32767 {
			return 0, s, false
		}
		return n, s[i:], true
	}
	major, rest, ok := num(v)
	if !ok {
		return 0, 0, false
	}
	if len(rest) > 1 && rest[0] == '.' {
		if m, _, ok := num(rest[1:]); ok {
			minor = m
		}
	}
	return major, minor, true
}
