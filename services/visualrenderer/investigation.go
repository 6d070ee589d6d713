package visualrenderer

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"threatview/platform/wire"
)

// The investigation read API (DESIGN.md, "Investigation"; docs/investigation.md):
// event search, the live stream, timelines, overview numbers, map data, the
// threat report and the taxonomy.

// ErrParam means a query parameter is bad (422); errors wrapping it are a
// *ParamError naming the parameter.
var ErrParam = errors.New("invalid parameter")

// ErrNotFound means the subject of a timeline has no events (404).
var ErrNotFound = errors.New("not found")

// ParamError names the bad parameter.
type ParamError struct {
	Param, Message string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Message }

// Unwrap returns ErrParam.
func (e *ParamError) Unwrap() error { return ErrParam }

func badParam(p, format string, args ...any) error {
	return &ParamError{Param: p, Message: fmt.Sprintf(format, args...)}
}

// Bounds of the read API.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	// MaxSearchSpan is the widest time range one search may cover.
	MaxSearchSpan = 31 * 24 * time.Hour
	// MaxRollupSpan is the widest range of overview, map and report.
	MaxRollupSpan = 92 * 24 * time.Hour
	// DefaultK is the least number of distinct devices a map cell must hold
	// to be shown.
	DefaultK = 5
	maxParam = 256
)

// Categories of the taxonomy (MASVS-RESILIENCE plus network and malware).
var Categories = []string{"platform-integrity", "anti-tampering", "anti-static-analysis",
	"anti-dynamic-analysis", "network", "malware", "other"}

// Severities of the taxonomy.
var Severities = []string{"low", "medium", "high", "critical"}

// IsCategory reports whether c is one of Categories.
func IsCategory(c string) bool { return contains(Categories, c) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ThreatClass is one threat type's place in the taxonomy.
type ThreatClass struct {
	Type     string `json:"type"`
	Category string `json:"category"`
	Severity string `json:"severity"`
}

// Taxonomy maps threat types to their class; a type it does not list is
// category other, severity medium.
type Taxonomy map[string]ThreatClass

// Class returns the class of a threat type.
func (t Taxonomy) Class(typ string) ThreatClass {
	if c, ok := t[typ]; ok {
		return c
	}
	return ThreatClass{Type: typ, Category: "other", Severity: "medium"}
}

// EventFilter selects events. Empty fields do not filter.
type EventFilter struct {
	AppID, Type, Threat, Category, DeviceID, SessionID, Country, OS string
	// Users are the pseudonyms of the user asked for (one per key).
	Users    []string
	From, To time.Time // received_at, [From, To)
	Limit    int
	After    *Cursor // the page after this event (newest first)
}

// Cursor is the keyset position of an event: newest first by received_at,
// then id.
type Cursor struct {
	ReceivedAt time.Time
	ID         string
}

// String encodes the cursor for next_cursor.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.ReceivedAt.UnixMicro(), 10) + "," + c.ID))
}

func parseCursor(s string) (*Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, badParam("cursor", "is not a cursor this API returned")
	}
	us, id, ok := strings.Cut(string(b), ",")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || !wire.IsUUID(id) {
		return nil, badParam("cursor", "is not a cursor this API returned")
	}
	return &Cursor{ReceivedAt: time.UnixMicro(n).UTC(), ID: id}, nil
}

// Event is one stored event as the read API shows it.
type Event struct {
	EventID    string         `json:"event_id"`
	Type       string         `json:"type"`
	OccurredAt time.Time      `json:"occurred_at"`
	ReceivedAt time.Time      `json:"received_at"`
	App        wire.App       `json:"app"`
	Device     EventDevice    `json:"device"`
	Session    *wire.Session  `json:"session,omitempty"`
	User       *wire.User     `json:"user,omitempty"`
	Country    string         `json:"country"`
	Location   *wire.Location `json:"location,omitempty"`
	Threats    []ThreatClass  `json:"threats"`
	cursor     Cursor
}

// EventDevice is the device of an Event (every field shown, blank or not).
type EventDevice struct {
	ID           string `json:"id"`
	Model        string `json:"model"`
	Manufacturer string `json:"manufacturer"`
	OS           string `json:"os"`
	OSVersion    string `json:"os_version"`
	Language     string `json:"language"`
}

// SetCursor records the event's keyset position (stores call it).
func (e *Event) SetCursor(c Cursor) { e.cursor = c }

// Cursor returns the event's keyset position.
func (e *Event) Cursor() Cursor { return e.cursor }

// EventPage is one page of a search.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// Timeline is one subject's (device, session, user) history.
type Timeline struct {
	Kind      string           `json:"kind"`
	ID        string           `json:"id"`
	FirstSeen time.Time        `json:"first_seen"`
	LastSeen  time.Time        `json:"last_seen"`
	Events    int64            `json:"events"`
	Threats   map[string]int64 `json:"threats"`
	Apps      []TimelineApp    `json:"apps"`
	OS        []string         `json:"os"`
	Countries []string         `json:"countries"`
	Recent    []Event          `json:"recent"`
}

// TimelineApp is an app a subject used and its versions.
type TimelineApp struct {
	ID       string   `json:"id"`
	Versions []string `json:"versions"`
}

// Overview is the big numbers of a period.
type Overview struct {
	From         time.Time `json:"from"`
	To           time.Time `json:"to"`
	Events       int64     `json:"events"`
	ThreatEvents int64     `json:"threat_events"`
	Users        int64     `json:"users"`
	Devices      int64     `json:"devices"`
	Apps         int64     `json:"apps"`
}

// MapData is events and devices per country and per grid cell.
type MapData struct {
	From      time.Time    `json:"from"`
	To        time.Time    `json:"to"`
	K         int          `json:"k"`
	Countries []MapCountry `json:"countries"`
	Cells     []MapCell    `json:"cells"`
}

// MapCountry is one country's counts.
type MapCountry struct {
	Country string `json:"country"`
	Events  int64  `json:"events"`
	Devices int64  `json:"devices"`
}

// MapCell is one grid cell's counts (south-west corner).
type MapCell struct {
	Lat     float64 `json:"lat"`
	Lon     float64 `json:"lon"`
	Events  int64   `json:"events"`
	Devices int64   `json:"devices"`
}

// KeyCount is one key of a breakdown.
type KeyCount struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
}

// TimeCount is one point of a series.
type TimeCount struct {
	T     time.Time `json:"t"`
	Count int64     `json:"count"`
}

// ThreatReport correlates one threat type (or category) with OS, version,
// model, country, app version and time.
type ThreatReport struct {
	Threat        string      `json:"threat"`
	Category      string      `json:"category"`
	From          time.Time   `json:"from"`
	To            time.Time   `json:"to"`
	Granularity   string      `json:"granularity"`
	Events        int64       `json:"events"`
	Devices       int64       `json:"devices"`
	ByOS          []KeyCount  `json:"by_os"`
	ByOSVersion   []KeyCount  `json:"by_os_version"`
	ByDeviceModel []KeyCount  `json:"by_device_model"`
	ByCountry     []KeyCount  `json:"by_country"`
	ByAppVersion  []KeyCount  `json:"by_app_version"`
	Series        []TimeCount `json:"series"`
}

// ThreatSelection is the threat types a report covers: Types, and with
// Unlisted every type not in Listed (the category other).
type ThreatSelection struct {
	Types    []string
	Unlisted bool
	Listed   []string
}

// Select returns the selection of a threat type or, when name is a
// category, of every type of that category in t.
func (t Taxonomy) Select(name string) ThreatSelection {
	if !IsCategory(name) {
		return ThreatSelection{Types: []string{name}}
	}
	sel := ThreatSelection{Types: []string{}, Listed: []string{}}
	for typ, c := range t {
		sel.Listed = append(sel.Listed, typ)
		if c.Category == name {
			sel.Types = append(sel.Types, typ)
		}
	}
	sel.Unlisted = name == "other"
	return sel
}

// Match reports whether sel selects a threat type.
func (sel ThreatSelection) Match(threat string) bool {
	if contains(sel.Types, threat) {
		return true
	}
	return sel.Unlisted && !contains(sel.Listed, threat)
}

// RollupQuery is the query of overview, map and report: an app (blank: all)
// and whole UTC days [From, To).
type RollupQuery struct {
	AppID    string
	From, To time.Time
	Threat   string // map: a threat type (blank: all events)
	K        int
}

// Investigator is the store behind the read API.
type Investigator interface {
	// SearchEvents returns a page of events, newest first. Errors wrap
	// ErrUnavailable.
	SearchEvents(ctx context.Context, f EventFilter, tax Taxonomy) (EventPage, error)
	// EventsSince returns events received at or after since, oldest first,
	// at most limit (the live stream's poll). Errors wrap ErrUnavailable.
	EventsSince(ctx context.Context, f EventFilter, since time.Time, limit int, tax Taxonomy) ([]Event, error)
	// Timeline returns a subject's history (kind device, session or user;
	// ids are the pseudonyms for a user). ErrNotFound when it has no events.
	Timeline(ctx context.Context, kind string, ids []string, appID string, tax Taxonomy) (Timeline, error)
	// Overview, Map and ThreatReport read the investigation rollups.
	Overview(ctx context.Context, q RollupQuery) (Overview, error)
	Map(ctx context.Context, q RollupQuery) (MapData, error)
	// ThreatReport reports the threat types sel selects.
	ThreatReport(ctx context.Context, q RollupQuery, sel ThreatSelection) (ThreatReport, error)
	// Taxonomy returns the classes of the listed threat types.
	Taxonomy(ctx context.Context) (Taxonomy, error)
	// SetThreatClass writes one type's class; audit runs inside the
	// transaction, before it commits (a change is never unaudited).
	SetThreatClass(ctx context.Context, c ThreatClass, by string, audit func(context.Context) error) error
}

// ParseEventFilter reads the search parameters of GET /v1/events (and of
// the stream, with stream true: no cursor and no range). users
// pseudonymises a raw user_id (nil: user_id is refused).
func ParseEventFilter(v url.Values, now time.Time, users *wire.Pseudonymizer, stream bool) (EventFilter, error) {
	var f EventFilter
	for _, p := range []struct {
		name string
		dst  *string
	}{{"app_id", &f.AppID}, {"type", &f.Type}, {"threat", &f.Threat}, {"category", &f.Category},
		{"device_id", &f.DeviceID}, {"session_id", &f.SessionID}, {"country", &f.Country}, {"os", &f.OS}} {
		s := v.Get(p.name)
		if len(s) > maxParam {
			return f, badParam(p.name, "is longer than %d bytes", maxParam)
		}
		*p.dst = s
	}
	if f.Category != "" && !IsCategory(f.Category) {
		return f, badParam("category", "want one of %s", strings.Join(Categories, ", "))
	}
	if f.Country != "" {
		if len(f.Country) != 2 {
			return f, badParam("country", "want an ISO 3166-1 alpha-2 code")
		}
		f.Country = strings.ToUpper(f.Country)
	}
	if u := v.Get("user_id"); u != "" {
		switch {
		case len(u) > maxParam:
			return f, badParam("user_id", "is longer than %d bytes", maxParam)
		case wire.IsPseudonym(u):
			f.Users = []string{u}
		case users == nil:
			return f, badParam("user_id", "cannot be looked up: no user id key is configured (search by pseudonym instead)")
		default:
			f.Users = users.All(u)
		}
	}
	f.Limit = DefaultLimit
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return f, badParam("limit", "want a whole number from 1 to %d", MaxLimit)
		}
		f.Limit = n
	}
	if stream {
		return f, nil
	}
	var err error
	if f.To, err = parseInvTime(v, "to", now); err != nil {
		return f, err
	}
	if f.From, err = parseInvTime(v, "from", f.To.Add(-24*time.Hour)); err != nil {
		return f, err
	}
	if !f.From.Before(f.To) {
		return f, badParam("from", "must be before to")
	}
	if f.To.Sub(f.From) > MaxSearchSpan {
		return f, badParam("from", "the range may span at most %d days", int(MaxSearchSpan/(24*time.Hour)))
	}
	if s := v.Get("cursor"); s != "" {
		if f.After, err = parseCursor(s); err != nil {
			return f, err
		}
	}
	return f, nil
}

func parseInvTime(v url.Values, name string, def time.Time) (time.Time, error) {
	s := v.Get(name)
	if s == "" {
		return def.UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if d, derr := time.Parse(time.DateOnly, s); derr == nil {
			return d, nil
		}
		return t, badParam(name, "want RFC 3339 (2026-12-03T10:00:00Z) or a date (2026-12-03)")
	}
	if t.Year() < 1970 || t.Year() > 9999 {
		return t, badParam(name, "must lie between 1970 and 9999")
	}
	return t.UTC(), nil
}

// ParseRollupQuery reads app_id, from and to (whole UTC days; default
// today), threat and k.
func ParseRollupQuery(v url.Values, now time.Time) (RollupQuery, error) {
	var q RollupQuery
	q.AppID = v.Get("app_id")
	if len(q.AppID) > maxParam {
		return q, badParam("app_id", "is longer than %d bytes", maxParam)
	}
	q.Threat = v.Get("threat")
	if len(q.Threat) > 128 {
		return q, badParam("threat", "is longer than 128 bytes")
	}
	today := now.UTC().Truncate(24 * time.Hour)
	var err error
	if q.From, err = parseInvTime(v, "from", today); err != nil {
		return q, err
	}
	if q.To, err = parseInvTime(v, "to", q.From.Add(24*time.Hour)); err != nil {
		return q, err
	}
	q.From = q.From.Truncate(24 * time.Hour)
	if t := q.To.Truncate(24 * time.Hour); !t.Equal(q.To) {
		q.To = t.Add(24 * time.Hour)
	}
	if !q.From.Before(q.To) {
		return q, badParam("from", "must be before to")
	}
	if q.To.Sub(q.From) > MaxRollupSpan {
		return q, badParam("from", "the range may span at most %d days", int(MaxRollupSpan/(24*time.Hour)))
	}
	q.K = DefaultK
	if s := v.Get("k"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < DefaultK || n > 1000 {
			return q, badParam("k", "want a whole number from %d to 1000", DefaultK)
		}
		q.K = n
	}
	return q, nil
}
