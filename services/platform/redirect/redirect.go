// Package redirect checks where a web UI may send a browser after sign-in.
//
// A "next" parameter is attacker-controlled: a link to
// /login?next=//evil.example (or /\evil.example, /\t/evil.example, or an
// absolute URL) would otherwise take a person who has just signed in to
// another site. Browsers strip tabs and newlines from a URL and read a
// backslash as a slash, so a target that looks like a path to the server can
// name another host to the browser. Local accepts only what every browser
// reads as a path on the same origin.
package redirect

import (
	"net/url"
	"strings"
)

// Local returns next when it is a relative reference to a path on the
// current origin (an absolute path, with an optional query and fragment),
// and ("/", false) otherwise. It refuses a scheme, a host, a leading "//",
// any backslash, any control character or space, and the same in the
// target's percent-decoded form (a server or proxy that decodes the path
// once more must not find another host there either).
func Local(next string) (string, bool) {
	if !localPath(next, false) {
		return "/", false
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/", false
	}
	if dec, err := url.PathUnescape(u.EscapedPath()); err != nil || !localPath(dec, true) {
		return "/", false
	}
	return next, true
}

// localPath: an absolute path, not "//", with nothing a browser would drop
// or turn into a slash. A decoded path may hold spaces (%20).
func localPath(p string, decoded bool) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	for _, r := range p {
		if r < ' ' || (r == ' ' && !decoded) || r == 0x7f || r == '\\' || (r >= 0x80 && r <= 0x9f) || r == '\u00a0' ||
			r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			return false
		}
	}
	return true
}
