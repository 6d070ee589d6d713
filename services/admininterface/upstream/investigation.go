package upstream

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Event is one stored event as the investigation API shows it.
type Event struct {
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	ReceivedAt time.Time `json:"received_at"`
	App        struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"app"`
	Device struct {
		ID           string `json:"id"`
		Model        string `json:"model"`
		Manufacturer string `json:"manufacturer"`
		OS           string `json:"os"`
		OSVersion    string `json:"os_version"`
		Language     string `json:"language"`
	} `json:"device"`
	Session *struct {
		ID string `json:"id"`
	} `json:"session,omitempty"`
	User *struct {
		Pseudonym string `json:"pseudonym"`
	} `json:"user,omitempty"`
	Country  string `json:"country"`
	Location *struct {
		Lat float64 `json:"lat"`
		Lon float64 `json:"lon"`
	} `json:"location,omitempty"`
	Threats []Threat `json:"threats"`
}

// Threat is one threat of an event, classified by the taxonomy.
type Threat struct {
	Type     string `json:"type"`
	Category string `json:"category"`
	Severity string `json:"severity"`
}

// EventPage is one page of GET /v1/events, newest first.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor"`
}

// Overview is GET /v1/overview: distinct counts over a period.
type Overview struct {
	From         time.Time `json:"from"`
	To           time.Time `json:"to"`
	Events       int64     `json:"events"`
	ThreatEvents int64     `json:"threat_events"`
	Users        int64     `json:"users"`
	Devices      int64     `json:"devices"`
	Apps         int64     `json:"apps"`
}

// MapData is GET /v1/map: counts per country and per location cell.
type MapData struct {
	Countries []struct {
		Country string `json:"country"`
		Events  int64  `json:"events"`
		Devices int64  `json:"devices"`
	} `json:"countries"`
	Cells []struct {
		Lat     float64 `json:"lat"`
		Lon     float64 `json:"lon"`
		Events  int64   `json:"events"`
		Devices int64   `json:"devices"`
	} `json:"cells"`
}

// KeyCount is one row of a report's breakdown.
type KeyCount struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
}

// ThreatReport is GET /v1/reports/threats/{type}.
type ThreatReport struct {
	Threat        string     `json:"threat"`
	Category      string     `json:"category"`
	Events        int64      `json:"events"`
	Devices       int64      `json:"devices"`
	ByOS          []KeyCount `json:"by_os"`
	ByOSVersion   []KeyCount `json:"by_os_version"`
	ByDeviceModel []KeyCount `json:"by_device_model"`
	ByCountry     []KeyCount `json:"by_country"`
	ByAppVersion  []KeyCount `json:"by_app_version"`
	Series        []Point    `json:"series"`
}

// Timeline is GET /v1/timelines/{kind}/{id}.
type Timeline struct {
	FirstSeen time.Time        `json:"first_seen"`
	LastSeen  time.Time        `json:"last_seen"`
	Events    int64            `json:"events"`
	Threats   map[string]int64 `json:"threats"`
	Apps      []struct {
		ID       string   `json:"id"`
		Versions []string `json:"versions"`
	} `json:"apps"`
	OS        []string `json:"os"`
	Countries []string `json:"countries"`
	Recent    []Event  `json:"recent"`
}

// Taxonomy is GET /v1/taxonomy: every known threat type's class.
type Taxonomy struct {
	Threats []Threat `json:"threats"`
}

// Events returns one page of events matching q (the API's filters).
func (c Renderer) Events(ctx context.Context, bearer string, q url.Values) (EventPage, error) {
	var out EventPage
	err := c.call(ctx, http.MethodGet, "/v1/events", q, bearer, nil, &out)
	return out, err
}

// Overview returns the distinct counts of q's period.
func (c Renderer) Overview(ctx context.Context, bearer string, q url.Values) (Overview, error) {
	var out Overview
	err := c.call(ctx, http.MethodGet, "/v1/overview", q, bearer, nil, &out)
	return out, err
}

// Map returns the counts per country and location cell.
func (c Renderer) Map(ctx context.Context, bearer string, q url.Values) (MapData, error) {
	var out MapData
	err := c.call(ctx, http.MethodGet, "/v1/map", q, bearer, nil, &out)
	return out, err
}

// ThreatReport returns one threat type's report.
func (c Renderer) ThreatReport(ctx context.Context, bearer, threat string, q url.Values) (ThreatReport, error) {
	var out ThreatReport
	err := c.call(ctx, http.MethodGet, "/v1/reports/threats/"+url.PathEscape(threat), q, bearer, nil, &out)
	return out, err
}

// Timeline returns a device's, session's or user's timeline.
func (c Renderer) Timeline(ctx context.Context, bearer, kind, id string, q url.Values) (Timeline, error) {
	var out Timeline
	err := c.call(ctx, http.MethodGet, "/v1/timelines/"+url.PathEscape(kind)+"/"+url.PathEscape(id), q, bearer, nil, &out)
	return out, err
}

// Taxonomy returns the threat types and their categories.
func (c Renderer) Taxonomy(ctx context.Context, bearer string) (Taxonomy, error) {
	var out Taxonomy
	err := c.call(ctx, http.MethodGet, "/v1/taxonomy", nil, bearer, nil, &out)
	return out, err
}

// Stream opens GET /v1/events/stream (text/event-stream) with ctx's
// lifetime, not the client's timeout; the caller closes the body.
func (c Renderer) Stream(ctx context.Context, bearer string, q url.Values) (*http.Response, error) {
	h := http.Header{"Authorization": {"Bearer " + bearer}, "Accept": {"text/event-stream"}}
	resp, err := c.doHeader(ctx, http.MethodGet, "/v1/events/stream", q, h, nil)
	return resp, err
}
