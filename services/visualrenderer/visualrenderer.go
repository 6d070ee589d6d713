// Package visualrenderer serves the rollups of the events DB as a stats API,
// as charts (SVG and PNG) and as server-rendered dashboards.
//
// A query names a dimension (country, device_model, os, threat), an
// optional app, a granularity (hour, day, month) and a range [from, to) in
// UTC. The range is widened to whole buckets: from is truncated to the start
// of its bucket and to is rounded up to the next bucket boundary, and the
// answer echoes the range it covers. Buckets with no events are absent from
// a series (a client that draws lines fills them with zero). A range may
// span at most MaxBuckets[granularity] buckets:
//
//	hour   744 buckets (31 days)
//	day    1,100 buckets (about 3 years)
//	month  240 buckets (20 years)
//
// An answer holds at most MaxPoints points (keys × buckets): a query that
// could need more is refused with ErrTooLarge, whose text says how many
// keys (top) the range allows.
//
// Counts come from the rollups kept exact by the processor's aggregator;
// for the threat dimension a count is a threat sighting (one per distinct
// threat type of an event), so its total may exceed the number of events.
// Counts of events stored before rollups were split by app, whose facts
// were already dropped, belong to the app "" (see migration 000003): they
// count in a query over all apps and in no query for one app.
package visualrenderer

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors.
var (
	// ErrInvalid means the query is malformed or out of bounds; the error
	// text says which parameter and why.
	ErrInvalid = errors.New("invalid query")
	// ErrUnavailable means the database could not answer.
	ErrUnavailable = errors.New("stats unavailable")
	// ErrTooLarge means the answer could hold more than MaxPoints points;
	// the error text says how to narrow the query.
	ErrTooLarge = errors.New("answer too large")
)

// MaxPoints caps the points of one answer: its keys times the buckets of
// its range, whether or not a bucket has counts (about 4 MB of JSON).
const MaxPoints = 100_000

// Dimension is what the counts are split by.
type Dimension string

// The dimensions of the rollups.
const (
	Country     Dimension = "country"
	DeviceModel Dimension = "device_model"
	OS          Dimension = "os"
	Threat      Dimension = "threat"
)

// Dimensions lists every dimension in a stable order.
var Dimensions = []Dimension{Country, DeviceModel, OS, Threat}

// Valid reports whether d is one of Dimensions.
func (d Dimension) Valid() bool {
	for _, x := range Dimensions {
		if d == x {
			return true
		}
	}
	return false
}

// Title is the dimension as people read it.
func (d Dimension) Title() string {
	switch d {
	case Country:
		return "Country"
	case DeviceModel:
		return "Device model"
	case OS:
		return "OS"
	case Threat:
		return "Threat type"
	}
	return string(d)
}

// Unit names what a count of d counts.
func (d Dimension) Unit() string {
	if d == Threat {
		return "threat sightings"
	}
	return "events"
}

// Granularity is the width of a bucket.
type Granularity string

// The granularities of the rollups.
const (
	Hour  Granularity = "hour"
	Day   Granularity = "day"
	Month Granularity = "month"
)

// MaxBuckets caps how many buckets one query may span, per granularity.
var MaxBuckets = map[Granularity]int{Hour: 744, Day: 1100, Month: 240}

// Truncate returns the start (UTC) of the bucket holding t.
func (g Granularity) Truncate(t time.Time) time.Time {
	t = t.UTC()
	switch g {
	case Hour:
		return t.Truncate(time.Hour)
	case Day:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	default:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
}

// Add returns the start of the bucket n buckets after the one starting at t.
func (g Granularity) Add(t time.Time, n int) time.Time {
	switch g {
	case Hour:
		return t.Add(time.Duration(n) * time.Hour)
	case Day:
		return t.AddDate(0, 0, n)
	default:
		return t.AddDate(0, n, 0)
	}
}

// RoundUp returns the first bucket boundary at or after t.
func (g Granularity) RoundUp(t time.Time) time.Time {
	s := g.Truncate(t)
	if s.Equal(t.UTC()) {
		return s
	}
	return g.Add(s, 1)
}

// Buckets returns how many buckets [from, to) spans (both on boundaries).
func (g Granularity) Buckets(from, to time.Time) int {
	switch g {
	case Hour:
		return int(to.Sub(from) / time.Hour)
	case Day:
		return int(to.Sub(from).Round(time.Hour) / (24 * time.Hour))
	default:
		return (to.Year()-from.Year())*12 + int(to.Month()-from.Month())
	}
}

// MaxTop caps the top parameter.
const MaxTop = 1000

// Query asks for the counts of one dimension.
type Query struct {
	Dimension   Dimension
	AppID       string // blank: every app
	Granularity Granularity
	From, To    time.Time // UTC bucket boundaries, From < To
	Top         int       // 0: every key
	// TotalsOnly asks for each key's total without its points (a ranked
	// table); not a URL parameter.
	TotalsOnly bool
	// Summed asks for one series, every key's counts added per bucket (a
	// chart of the total); not a URL parameter.
	Summed bool
}

// CheckPoints returns ErrTooLarge when an answer to q with keys series
// could hold more than MaxPoints points.
func (q Query) CheckPoints(keys int) error {
	if q.TotalsOnly {
		return nil
	}
	if q.Summed {
		keys = 1
	}
	b := q.Granularity.Buckets(q.From, q.To)
	if b < 1 || keys*b <= MaxPoints {
		return nil
	}
	return fmt.Errorf("%w: %d keys × %d %s buckets could make %d points, more than the %d one answer may hold; "+
		"ask for top=%d or fewer keys, a coarser granularity or a shorter range", ErrTooLarge, keys, b, q.Granularity, keys*b, MaxPoints, max(1, MaxPoints/b))
}

// Point is the count of one bucket.
type Point struct {
	T     time.Time `json:"t"`
	Count int64     `json:"count"`
}

// Series is the counts of one key, buckets in time order.
type Series struct {
	Key    string  `json:"key"`
	Total  int64   `json:"total"`
	Points []Point `json:"points"`
}

// Stats is the answer to a Query: the series of the keys with the largest
// totals first (ties by key), Total over every key, not only the top ones.
type Stats struct {
	Dimension   Dimension   `json:"dimension"`
	Granularity Granularity `json:"granularity"`
	From        time.Time   `json:"from"`
	To          time.Time   `json:"to"`
	Total       int64       `json:"total"`
	Series      []Series    `json:"series"`
}

// Store reads the rollups.
type Store interface {
	// Stats answers q (already validated). Errors wrap ErrUnavailable.
	Stats(ctx context.Context, q Query) (Stats, error)
	// Apps lists the apps with counts in the rollups, sorted. Errors wrap
	// ErrUnavailable.
	Apps(ctx context.Context) ([]string, error)
}

// Defaults applied by ParseQuery when a parameter is absent.
const (
	DefaultGranularity = Day
	maxAppID           = 200
)

// defaultSpan is how many buckets back from now a query without from
// reaches, per granularity.
var defaultSpan = map[Granularity]int{Hour: 24, Day: 30, Month: 12}

// ParseQuery reads a query from URL parameters (app_id, granularity, from,
// to, top) for dimension dim, at time now. Without to, the range ends at
// the end of now's bucket; without from, it starts a default span before
// to (24 hours, 30 days or 12 months). Errors wrap ErrInvalid.
func ParseQuery(dim string, v url.Values, now time.Time) (Query, error) {
	q := Query{Dimension: Dimension(dim), AppID: v.Get("app_id"), Granularity: Granularity(v.Get("granularity"))}
	if !q.Dimension.Valid() {
		return q, fmt.Errorf("%w: unknown dimension %q (want country, device_model, os or threat)", ErrInvalid, dim)
	}
	if q.Granularity == "" {
		q.Granularity = DefaultGranularity
	}
	if _, ok := MaxBuckets[q.Granularity]; !ok {
		return q, fmt.Errorf("%w: granularity %q (want hour, day or month)", ErrInvalid, q.Granularity)
	}
	if len(q.AppID) > maxAppID {
		return q, fmt.Errorf("%w: app_id longer than %d bytes", ErrInvalid, maxAppID)
	}
	g := q.Granularity
	var err error
	if s := v.Get("to"); s != "" {
		if q.To, err = parseTime("to", s); err != nil {
			return q, err
		}
		q.To = g.RoundUp(q.To)
	} else {
		q.To = g.Add(g.Truncate(now), 1)
	}
	if s := v.Get("from"); s != "" {
		if q.From, err = parseTime("from", s); err != nil {
			return q, err
		}
		q.From = g.Truncate(q.From)
	} else {
		q.From = g.Add(q.To, -defaultSpan[g])
	}
	if !q.From.Before(q.To) {
		return q, fmt.Errorf("%w: from (%s) must be before to (%s)", ErrInvalid, q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	if n, max := g.Buckets(q.From, q.To), MaxBuckets[g]; n > max {
		return q, fmt.Errorf("%w: the range spans %d %s buckets, more than the %d allowed; use a coarser granularity or a shorter range", ErrInvalid, n, g, max)
	}
	if s := v.Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxTop {
			return q, fmt.Errorf("%w: top %q (want a whole number from 1 to %d)", ErrInvalid, s, MaxTop)
		}
		q.Top = n
		if err := q.CheckPoints(n); err != nil {
			return q, err
		}
	}
	return q, nil
}

// minTime and maxTime bound the times a query may name, as the collector
// bounds event times.
var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

func parseTime(name, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		return t, fmt.Errorf("%w: %s %q is not an RFC 3339 time (e.g. 2026-11-01T00:00:00Z)", ErrInvalid, name, s)
	}
	if t.Before(minTime) || t.After(maxTime) {
		return t, fmt.Errorf("%w: %s %q lies outside 1970..9999", ErrInvalid, name, s)
	}
	return t.UTC(), nil
}

// Encode returns the query as URL parameters, the inverse of ParseQuery.
func (q Query) Encode() url.Values {
	v := url.Values{}
	if q.AppID != "" {
		v.Set("app_id", q.AppID)
	}
	v.Set("granularity", string(q.Granularity))
	v.Set("from", q.From.UTC().Format(time.RFC3339))
	v.Set("to", q.To.UTC().Format(time.RFC3339))
	if q.Top > 0 {
		v.Set("top", strconv.Itoa(q.Top))
	}
	return v
}

// Filled returns s's points over every bucket of [from, to), zero where a
// bucket is absent, for drawing.
func (s Series) Filled(g Granularity, from, to time.Time) []Point {
	out := make([]Point, 0, g.Buckets(from, to))
	i := 0
	for t := from; t.Before(to); t = g.Add(t, 1) {
		p := Point{T: t}
		for i < len(s.Points) && s.Points[i].T.Before(t) {
			i++
		}
		if i < len(s.Points) && s.Points[i].T.Equal(t) {
			p.Count = s.Points[i].Count
		}
		out = append(out, p)
	}
	return out
}
