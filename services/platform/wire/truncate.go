package wire

import "unicode/utf8"

// Truncate cuts s to at most n bytes without splitting a UTF-8 character
// (audit record fields, dead-letter reasons).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
