package collector

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"threatview/platform/wire"
)

// SessionInput is the session an event belongs to (one app run).
type SessionInput struct {
	ID string `json:"id"`
}

// UserInput is the app's user. ID is the raw id: it lives in the
// collector's memory only, and Enrich replaces it by its pseudonym.
type UserInput struct {
	ID string `json:"id"`
}

// LocationInput is where the device was, as precise as the app knows it;
// Enrich coarsens it to the grid before anything else sees it.
type LocationInput struct {
	Lat       *float64 `json:"lat"`
	Lon       *float64 `json:"lon"`
	AccuracyM *float64 `json:"accuracy_m"`
}

// Limits of the investigation fields (bytes).
const (
	MaxSessionIDLen = 128
	MaxUserIDLen    = 256
	MaxLanguageLen  = 35
	// DefaultGrid is the location grid in degrees (about 11 km of latitude).
	DefaultGrid = 0.1
)

// checkInvestigation validates session, user, device.language and location;
// it returns the bad field and why, or "". Messages never quote the value
// (a user id or a position must not reach logs through an error).
func (in *Input) checkInvestigation() (field, msg string) {
	if s := in.Session; s != nil {
		switch {
		case s.ID == "":
			return "session.id", "is required when session is given"
		case len(s.ID) > MaxSessionIDLen:
			return "session.id", fmt.Sprintf("is longer than %d bytes", MaxSessionIDLen)
		}
	}
	if u := in.User; u != nil {
		switch {
		case u.ID == "":
			return "user.id", "is required when user is given"
		case len(u.ID) > MaxUserIDLen:
			return "user.id", fmt.Sprintf("is longer than %d bytes", MaxUserIDLen)
		case !utf8.ValidString(u.ID) || strings.IndexByte(u.ID, 0) >= 0:
			return "user.id", "must be valid UTF-8 without NUL"
		}
	}
	if l := in.Device.Language; l != "" {
		if len(l) > MaxLanguageLen {
			return "device.language", fmt.Sprintf("is longer than %d bytes", MaxLanguageLen)
		}
		if !IsLanguageTag(l) {
			return "device.language", "must be a BCP 47 language tag (e.g. en-GB)"
		}
	}
	if loc := in.Location; loc != nil {
		switch {
		case loc.Lat == nil:
			return "location.lat", "is required when location is given"
		case loc.Lon == nil:
			return "location.lon", "is required when location is given"
		case !(*loc.Lat >= -90 && *loc.Lat <= 90):
			return "location.lat", "must lie between -90 and 90"
		case !(*loc.Lon >= -180 && *loc.Lon <= 180):
			return "location.lon", "must lie between -180 and 180"
		case loc.AccuracyM != nil && !(*loc.AccuracyM >= 0 && *loc.AccuracyM <= 1e7):
			return "location.accuracy_m", "must lie between 0 and 10000000"
		}
	}
	return "", ""
}

// IsLanguageTag checks the syntax of a BCP 47 tag (RFC 5646): a primary
// language of 2-3 letters (or 4-8, registered ones), or "x-..." private
// use, then subtags of 1-8 letters and digits, joined by hyphens. It does
// not check the registry: an unknown but well-formed tag is kept.
func IsLanguageTag(tag string) bool {
	parts := strings.Split(tag, "-")
	for i, p := range parts {
		if len(p) == 0 || len(p) > 8 {
			return false
		}
		for k := 0; k < len(p); k++ {
			c := p[k] | 0x20
			letter := 'a' <= c && c <= 'z'
			digit := '0' <= p[k] && p[k] <= '9'
			if i == 0 && !letter || !letter && !digit {
				return false
			}
		}
		if i == 0 && len(p) == 1 && !(p == "x" || p == "X" || p == "i" || p == "I") {
			return false
		}
	}
	return len(parts) > 1 || len(parts[0]) >= 2
}

// Coarsen moves a coordinate to the south-west corner of its grid cell
// (grid in degrees), rounded to a millionth of a degree so that the cell is
// written the same way every time (48.1, not 48.100000000000001).
func Coarsen(v, grid float64) float64 {
	c := math.Floor(v/grid+1e-9) * grid
	return math.Round(c*1e6) / 1e6
}

// investigation fills ev's session, user and location from src: the user id
// pseudonymised (dropped when no key is configured), the location coarsened.
func (e *Enricher) investigation(src *Input, ev *wire.Event) {
	ev.Session, ev.User, ev.Location = nil, nil, nil
	if src.Session != nil {
		ev.Session = &wire.Session{ID: src.Session.ID}
	}
	if src.User != nil && e.users != nil {
		ev.User = &wire.User{Pseudonym: e.users.Pseudonym(src.User.ID)}
	}
	if loc := src.Location; loc != nil && loc.Lat != nil && loc.Lon != nil {
		ev.Location = &wire.Location{Lat: Coarsen(*loc.Lat, e.grid), Lon: Coarsen(*loc.Lon, e.grid)}
	}
}

// WithInvestigation sets the user id pseudonymizer (nil: user ids are
// dropped) and the location grid in degrees, and returns e.
func (e *Enricher) WithInvestigation(users *wire.Pseudonymizer, grid float64) *Enricher {
	e.users = users
	if grid > 0 {
		e.grid = grid
	}
	return e
}
