package webui

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"threatview/admininterface/upstream"
	"threatview/platform/wire"
)

// The analyst's pages (role analyst, the reference's Insights Viewer), over
// the renderer's investigation API with the person's own token: the home
// page (big numbers, map, live Latest Events, threat reports), All Events,
// timelines and threat reports.

// period is a named time range of whole UTC days (the reference's pickers).
type period struct {
	Key, Label string
	From, To   time.Time
	// PrevFrom, PrevTo is the period before, of the same length.
	PrevFrom, PrevTo time.Time
	Granularity      string
}

var periodKeys = []struct{ key, label string }{
	{"today", "Today"}, {"yesterday", "Previous day"}, {"7d", "Previous 7 days"}, {"30d", "Previous 30 days"},
}

// parsePeriod reads key (blank: def) at now; the error names the field.
func parsePeriod(key, def string, now time.Time) (period, error) {
	if key == "" {
		key = def
	}
	day := now.UTC().Truncate(24 * time.Hour)
	p := period{Key: key, Granularity: "day"}
	switch key {
	case "today":
		p.From, p.To, p.Granularity = day, day.Add(24*time.Hour), "hour"
	case "yesterday":
		p.From, p.To, p.Granularity = day.Add(-24*time.Hour), day, "hour"
	case "7d":
		p.From, p.To = day.Add(-7*24*time.Hour), day
	case "30d":
		p.From, p.To = day.Add(-30*24*time.Hour), day
	default:
		return p, fmt.Errorf("period must be one of today, yesterday, 7d or 30d")
	}
	for _, k := range periodKeys {
		if k.key == key {
			p.Label = k.label
		}
	}
	n := p.To.Sub(p.From)
	p.PrevFrom, p.PrevTo = p.From.Add(-n), p.From
	return p, nil
}

func (p period) query(appID string) url.Values {
	q := url.Values{"from": {p.From.Format(time.RFC3339)}, "to": {p.To.Format(time.RFC3339)}}
	if appID != "" {
		q.Set("app_id", appID)
	}
	return q
}

func (p period) prevQuery(appID string) url.Values {
	q := p.query(appID)
	q.Set("from", p.PrevFrom.Format(time.RFC3339))
	q.Set("to", p.PrevTo.Format(time.RFC3339))
	return q
}

// idPattern bounds the ids and keys typed into the filters (app, device,
// session, user ids, threat types, OS names).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9._:@/+\- ]{1,128}$`)

// eventFilters are All Events' filters, as query parameters of the page and
// of the API.
var eventFilters = []struct{ Key, Label string }{
	{"app_id", "App"}, {"type", "Event type"}, {"threat", "Threat"}, {"category", "Category"},
	{"device_id", "Device ID"}, {"session_id", "Session ID"}, {"user_id", "User ID"}, {"country", "Country"}, {"os", "OS"},
}

// filterQuery reads the filters of q into the API's query; the error names
// the bad one.
func filterQuery(q url.Values, p period) (url.Values, error) {
	out := p.query("")
	for _, f := range eventFilters {
		v := strings.TrimSpace(q.Get(f.Key))
		if v == "" {
			continue
		}
		if !idPattern.MatchString(v) {
			return nil, fmt.Errorf("%s: use at most 128 letters, digits and . _ : @ / + - or spaces", f.Label)
		}
		out.Set(f.Key, v)
	}
	return out, nil
}

// bigNumber is one of the home page's five numbers with the previous
// period's beside it.
type bigNumber struct {
	ID, Label string
	Now, Prev int64
	Trend     string // up, down or same
}

func trend(now, prev int64) string {
	switch {
	case now > prev:
		return "up"
	case now < prev:
		return "down"
	}
	return "same"
}

// threatRow is one line of the threat reports list.
type threatRow struct {
	Type, Category, Href string
	Count, Prev          int64
	Trend                string
}

type homeData struct {
	Period           period
	Periods          []option
	AppID            string
	Numbers          []bigNumber
	Map              template.HTML
	Countries        []mapCount
	Latest           []eventRow
	LiveURL, MoreURL string
	Threats          []threatRow
	Apps             []string
	DashboardsURL    string
}

type option struct {
	Value, Label string
	Selected     bool
}

func periodOptions(cur string) []option {
	out := make([]option, len(periodKeys))
	for i, k := range periodKeys {
		out[i] = option{Value: k.key, Label: k.label, Selected: k.key == cur}
	}
	return out
}

// eventRow is an event as a list shows it, with its whole JSON for the
// details and the links to its timelines.
type eventRow struct {
	upstream.Event
	CountryName, ThreatList, JSON  string
	DeviceURL, SessionURL, UserURL string
	HasThreat                      bool
}

func rowsOf(events []upstream.Event) []eventRow {
	out := make([]eventRow, len(events))
	for i, e := range events {
		out[i] = rowOfEvent(e)
	}
	return out
}

func rowOfEvent(e upstream.Event) eventRow {
	b, _ := json.MarshalIndent(e, "", "  ")
	r := eventRow{Event: e, CountryName: countryName(e.Country), JSON: string(b), HasThreat: len(e.Threats) > 0}
	names := make([]string, len(e.Threats))
	for i, t := range e.Threats {
		names[i] = t.Type
	}
	r.ThreatList = strings.Join(names, ", ")
	q := ""
	if e.App.ID != "" {
		q = "?app_id=" + url.QueryEscape(e.App.ID)
	}
	if e.Device.ID != "" {
		r.DeviceURL = "/timelines/device/" + url.PathEscape(e.Device.ID) + q
	}
	if e.Session != nil && e.Session.ID != "" {
		r.SessionURL = "/timelines/session/" + url.PathEscape(e.Session.ID) + q
	}
	if e.User != nil && e.User.Pseudonym != "" {
		r.UserURL = "/timelines/user/" + url.PathEscape(e.User.Pseudonym) + q
	}
	return r
}

// parallel runs fs at once and returns the first error.
func parallel(fs ...func() error) error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// periodParam reads the period picker (blank: def); false when it answered.
func (s *Server) periodParam(w http.ResponseWriter, r *http.Request, def string) (period, bool) {
	p, err := parsePeriod(r.URL.Query().Get("period"), def, s.now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid", "Period: "+err.Error()+".")
		return p, false
	}
	return p, true
}

// appParam reads the app picker (blank: all apps); false when it answered.
func (s *Server) appParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	app := strings.TrimSpace(r.URL.Query().Get("app_id"))
	if app != "" && !idPattern.MatchString(app) {
		s.fail(w, r, http.StatusBadRequest, "invalid", "App: use at most 128 letters, digits and . _ : @ / + -.")
		return "", false
	}
	return app, true
}

// periodAndApp reads both pickers; false when it answered.
func (s *Server) periodAndApp(w http.ResponseWriter, r *http.Request, def string) (period, string, bool) {
	p, ok := s.periodParam(w, r, def)
	if !ok {
		return p, "", false
	}
	app, ok := s.appParam(w, r)
	return p, app, ok
}

// needRenderer answers the analyst's pages when no visual renderer is
// configured (VISUALRENDERER_SERVICE_URL blank): they have nothing to show.
func (s *Server) needRenderer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.deps.Renderer.Client != nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/" {
			p, _ := parsePeriod("", "yesterday", s.now())
			s.render(w, r, http.StatusOK, "home", "Threat View", homeData{Period: p, Periods: periodOptions(p.Key), DashboardsURL: "/dashboards"},
				"", "No visual renderer is configured (VISUALRENDERER_SERVICE_URL): there are no events to show.")
			return
		}
		w.Header().Set("Retry-After", "60")
		s.fail(w, r, http.StatusServiceUnavailable, "unavailable", "No visual renderer is configured (VISUALRENDERER_SERVICE_URL): there are no events to show.")
	})
}

func (s *Server) analystHome(w http.ResponseWriter, r *http.Request) {
	p, app, ok := s.periodAndApp(w, r, "yesterday")
	if !ok {
		return
	}
	var err error
	token := sessionOf(r).Token
	ctx := r.Context()
	var cur, prev upstream.Overview
	var mp upstream.MapData
	var latest upstream.EventPage
	var threats, prevThreats upstream.Stats
	var tax upstream.Taxonomy
	statsQ := func(v url.Values) url.Values { v.Set("granularity", "day"); return v }
	latestQ := url.Values{"limit": {"10"}}
	if app != "" {
		latestQ.Set("app_id", app)
	}
	err = parallel(
		func() (err error) { cur, err = s.deps.Renderer.Overview(ctx, token, p.query(app)); return },
		func() (err error) { prev, err = s.deps.Renderer.Overview(ctx, token, p.prevQuery(app)); return },
		func() (err error) { mp, err = s.deps.Renderer.Map(ctx, token, p.query(app)); return },
		func() (err error) { latest, err = s.deps.Renderer.Events(ctx, token, latestQ); return },
		func() (err error) {
			threats, err = s.deps.Renderer.Stats(ctx, token, "threat", statsQ(p.query(app)))
			return
		},
		func() (err error) {
			prevThreats, err = s.deps.Renderer.Stats(ctx, token, "threat", statsQ(p.prevQuery(app)))
			return
		},
		func() (err error) { tax, err = s.deps.Renderer.Taxonomy(ctx, token); return },
	)
	if err != nil {
		s.upstreamFail(w, r, "Reading the overview", err)
		return
	}
	d := homeData{Period: p, Periods: periodOptions(p.Key), AppID: app, Latest: rowsOf(latest.Events), DashboardsURL: "/dashboards"}
	d.Numbers = []bigNumber{
		{"n-events", "Total events", cur.Events, prev.Events, ""},
		{"n-threats", "Threats detected", cur.ThreatEvents, prev.ThreatEvents, ""},
		{"n-users", "Total users", cur.Users, prev.Users, ""},
		{"n-devices", "Total devices", cur.Devices, prev.Devices, ""},
		{"n-apps", "Total apps", cur.Apps, prev.Apps, ""},
	}
	for i := range d.Numbers {
		d.Numbers[i].Trend = trend(d.Numbers[i].Now, d.Numbers[i].Prev)
	}
	base := url.Values{"period": {p.Key}}
	if app != "" {
		base.Set("app_id", app)
	}
	d.Countries = countriesOf(mp, func(code string) string {
		v := cloneValues(base)
		v.Set("country", code)
		return "/events?" + v.Encode()
	})
	d.Map = drawMap("home-map", "Events worldwide, "+p.Label, d.Countries, pointsOf(mp))
	live := url.Values{}
	if app != "" {
		live.Set("app_id", app)
	}
	d.LiveURL = "/events/live?" + live.Encode()
	d.MoreURL = "/events?" + base.Encode()
	d.Threats = threatRows(threats, prevThreats, tax, base)
	seen := map[string]bool{}
	for _, e := range latest.Events {
		if e.App.ID != "" && !seen[e.App.ID] {
			seen[e.App.ID] = true
			d.Apps = append(d.Apps, e.App.ID)
		}
	}
	s.render(w, r, http.StatusOK, "home", "Threat View", d, "", "")
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func countriesOf(mp upstream.MapData, href func(code string) string) []mapCount {
	out := make([]mapCount, 0, len(mp.Countries))
	for _, c := range mp.Countries {
		out = append(out, mapCount{Code: c.Country, Name: countryName(c.Country), Count: c.Events, Devices: c.Devices, Href: href(c.Country)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

func pointsOf(mp upstream.MapData) []mapPoint {
	out := make([]mapPoint, len(mp.Cells))
	for i, c := range mp.Cells {
		out[i] = mapPoint{Lat: c.Lat, Lon: c.Lon, Count: c.Events}
	}
	return out
}

func threatRows(cur, prev upstream.Stats, tax upstream.Taxonomy, base url.Values) []threatRow {
	prevBy := map[string]int64{}
	for _, s := range prev.Series {
		prevBy[s.Key] = s.Total
	}
	cat := map[string]string{}
	for _, t := range tax.Threats {
		cat[t.Type] = t.Category
	}
	var out []threatRow
	for _, s := range cur.Series {
		out = append(out, threatRow{Type: s.Key, Category: cat[s.Key], Count: s.Total, Prev: prevBy[s.Key], Trend: trend(s.Total, prevBy[s.Key]),
			Href: "/reports/threats/" + url.PathEscape(s.Key) + "?" + base.Encode()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

// eventsPageMax is how many events All Events shows on one page.
const eventsPageMax = 50

type eventsData struct {
	Period                       period
	Periods                      []option
	Filters                      []filterField
	Rows                         []eventRow
	Map                          template.HTML
	Countries                    []mapCount
	NextURL, ExportURL, FirstURL string
	Filtered                     bool
}

type filterField struct {
	Key, Label, Value string
}

func (s *Server) eventsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, api, ok := s.eventQuery(w, r)
	if !ok {
		return
	}
	list := cloneValues(api)
	list.Set("limit", strconv.Itoa(eventsPageMax))
	if c := q.Get("cursor"); c != "" {
		if len(c) > 512 {
			s.fail(w, r, http.StatusBadRequest, "invalid", "The page cursor is too long.")
			return
		}
		list.Set("cursor", c)
	}
	mapQ := p.query(api.Get("app_id"))
	if t := api.Get("threat"); t != "" {
		mapQ.Set("threat", t)
	}
	token := sessionOf(r).Token
	var page upstream.EventPage
	var mp upstream.MapData
	err := parallel(
		func() (err error) { page, err = s.deps.Renderer.Events(r.Context(), token, list); return },
		func() (err error) { mp, err = s.deps.Renderer.Map(r.Context(), token, mapQ); return },
	)
	if err != nil {
		s.upstreamFail(w, r, "Listing events", err)
		return
	}
	d := eventsData{Period: p, Periods: periodOptions(p.Key), Rows: rowsOf(page.Events)}
	pageQ := url.Values{"period": {p.Key}}
	for _, f := range eventFilters {
		v := api.Get(f.Key)
		d.Filters = append(d.Filters, filterField{Key: f.Key, Label: f.Label, Value: v})
		if v != "" {
			pageQ.Set(f.Key, v)
			d.Filtered = true
		}
	}
	d.Countries = countriesOf(mp, func(code string) string {
		v := cloneValues(pageQ)
		v.Set("country", code)
		return "/events?" + v.Encode()
	})
	d.Map = drawMap("events-map", "Events by country, "+p.Label, d.Countries, pointsOf(mp))
	d.FirstURL = "/events?" + pageQ.Encode()
	d.ExportURL = "/events/export.csv?" + pageQ.Encode()
	if page.NextCursor != "" {
		v := cloneValues(pageQ)
		v.Set("cursor", page.NextCursor)
		d.NextURL = "/events?" + v.Encode()
	}
	s.render(w, r, http.StatusOK, "events", "All events", d, "", "")
}

// eventQuery reads All Events' period and filters into the API's query;
// false when it answered.
func (s *Server) eventQuery(w http.ResponseWriter, r *http.Request) (period, url.Values, bool) {
	p, ok := s.periodParam(w, r, "today")
	if !ok {
		return p, nil, false
	}
	api, err := filterQuery(r.URL.Query(), p)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid", err.Error()+".")
		return p, nil, false
	}
	return p, api, true
}

// exportMax bounds one CSV export (rows); the file says when it was cut.
const exportMax = 10000

// personalFilters are the filters whose values name a person: the audit
// record of an export says they were given, never their values.
var personalFilters = map[string]bool{"device_id": true, "session_id": true, "user_id": true}

// eventsExport writes the events matching the filters as CSV: at most
// exportMax rows, each cell formula-safe (csvCells), the export audited
// (action ui.events_export, the filters without personal values) before the
// first row leaves.
func (s *Server) eventsExport(w http.ResponseWriter, r *http.Request) {
	p, api, ok := s.eventQuery(w, r)
	if !ok {
		return
	}
	api.Set("limit", "500")
	token := sessionOf(r).Token
	page, err := s.deps.Renderer.Events(r.Context(), token, api)
	if err != nil {
		s.upstreamFail(w, r, "Exporting events", err)
		return
	}
	filters := map[string]any{"period": p.Key}
	for _, f := range eventFilters {
		if v := api.Get(f.Key); v != "" {
			if personalFilters[f.Key] {
				v = "(given)"
			}
			filters[f.Key] = v
		}
	}
	body, _ := json.Marshal(map[string]any{"filters": filters, "max_rows": exportMax})
	rec := wire.AuditRecord{ID: uuid.Must(uuid.NewV7()).String(), Time: s.now().UTC(), ActorToken: sessionOf(r).User.Username,
		Action: "ui.events_export", Resource: "events", Outcome: http.StatusOK, UserAgent: truncateUA(r.UserAgent()), Body: body}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.auditWait)
	err = s.recordAudit(ctx, rec)
	cancel()
	if err != nil {
		s.auditFails.Inc()
		s.log.Error("events export refused: it could not be audited", "by", sessionOf(r).User.Username, "err", err)
		w.Header().Set("Retry-After", "30")
		s.fail(w, r, http.StatusServiceUnavailable, "audit_unavailable", "Nothing was exported: the audit trail cannot record the export right now. Try again shortly.")
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="events-`+s.now().UTC().Format("20060102T150405Z")+`.csv"`)
	rc := http.NewResponseController(w)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"event_id", "type", "occurred_at", "received_at", "app_id", "app_version", "device_id", "device_model",
		"manufacturer", "os", "os_version", "language", "session_id", "user_pseudonym", "country", "threats"})
	rows := 0
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		for _, e := range page.Events {
			if rows >= exportMax {
				break
			}
			rows++
			row := rowOfEvent(e)
			sess, user := "", ""
			if e.Session != nil {
				sess = e.Session.ID
			}
			if e.User != nil {
				user = e.User.Pseudonym
			}
			_ = cw.Write(csvCells(e.EventID, e.Type, e.OccurredAt.UTC().Format(time.RFC3339Nano), e.ReceivedAt.UTC().Format(time.RFC3339Nano),
				e.App.ID, e.App.Version, e.Device.ID, e.Device.Model, e.Device.Manufacturer, e.Device.OS, e.Device.OSVersion, e.Device.Language,
				sess, user, e.Country, row.ThreatList))
		}
		cw.Flush()
		if cw.Error() != nil {
			return
		}
		_ = rc.Flush()
		if page.NextCursor == "" || rows >= exportMax {
			break
		}
		api.Set("cursor", page.NextCursor)
		if page, err = s.deps.Renderer.Events(r.Context(), token, api); err != nil {
			s.log.Error("events export failed mid-stream", "rows", rows, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
	if rows >= exportMax && page.NextCursor != "" {
		_ = cw.Write([]string{fmt.Sprintf("# cut at %d rows: narrow the filters for the rest", exportMax)})
		cw.Flush()
	}
	s.log.Info("events exported", "by", sessionOf(r).User.Username, "rows", rows)
}

func truncateUA(ua string) string {
	if len(ua) > 255 {
		ua = ua[:255]
	}
	return ua
}

// eventsLive relays the renderer's event stream (GET /v1/events/stream)
// to the home page's Latest Events, with the person's token. The browser's
// EventSource reconnects by itself when the stream ends.
func (s *Server) eventsLive(w http.ResponseWriter, r *http.Request) {
	app, ok := s.appParam(w, r)
	if !ok {
		return
	}
	q := url.Values{}
	if app != "" {
		q.Set("app_id", app)
	}
	resp, err := s.deps.Renderer.Stream(r.Context(), sessionOf(r).Token, q)
	if err != nil {
		s.upstreamFail(w, r, "Following events", err)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		line := sc.Bytes()
		if _, err := w.Write(append(line, '\n')); err != nil {
			return
		}
		if len(line) == 0 {
			if rc.Flush() != nil {
				return
			}
		}
	}
}

var timelineKinds = map[string]string{"device": "Device", "session": "Session", "user": "User"}

type timelineData struct {
	Kind, KindLabel, ID, AppID string
	upstream.Timeline
	Rows       []eventRow
	ThreatKeys []KeyCount
	EventsURL  string
}

// KeyCount is one line of a count table.
type KeyCount struct {
	Key   string
	Count int64
	Href  string
	Share string
}

func (s *Server) timelinePage(w http.ResponseWriter, r *http.Request) {
	kind, id := chi.URLParam(r, "kind"), chi.URLParam(r, "id")
	label, ok := timelineKinds[kind]
	if !ok {
		s.fail(w, r, http.StatusNotFound, "not_found", "There is no such timeline: use device, session or user.")
		return
	}
	if !idPattern.MatchString(id) {
		s.fail(w, r, http.StatusBadRequest, "invalid", "The id is not one the collector accepts.")
		return
	}
	app, ok := s.appParam(w, r)
	if !ok {
		return
	}
	q := url.Values{}
	if app != "" {
		q.Set("app_id", app)
	}
	tl, err := s.deps.Renderer.Timeline(r.Context(), sessionOf(r).Token, kind, id, q)
	if err != nil {
		s.upstreamFail(w, r, "Reading the timeline", err)
		return
	}
	d := timelineData{Kind: kind, KindLabel: label, ID: id, AppID: app, Timeline: tl, Rows: rowsOf(tl.Recent)}
	for k, n := range tl.Threats {
		d.ThreatKeys = append(d.ThreatKeys, KeyCount{Key: k, Count: n, Href: "/reports/threats/" + url.PathEscape(k) + "?period=30d"})
	}
	sort.Slice(d.ThreatKeys, func(i, j int) bool { return d.ThreatKeys[i].Count > d.ThreatKeys[j].Count })
	ev := url.Values{"period": {"30d"}, kind + "_id": {id}}
	if app != "" {
		ev.Set("app_id", app)
	}
	d.EventsURL = "/events?" + ev.Encode()
	s.render(w, r, http.StatusOK, "timeline", label+" timeline", d, "", "")
}

type reportData struct {
	upstream.ThreatReport
	Period     period
	Periods    []option
	AppID      string
	Share      string
	Breakdowns []breakdown
	Map        template.HTML
	Countries  []mapCount
	Series     []KeyCount
	SeriesMax  int64
	AllDevices int64
	EventsURL  string
}

type breakdown struct {
	ID, Title string
	Rows      []KeyCount
}

func (s *Server) threatReportPage(w http.ResponseWriter, r *http.Request) {
	threat := chi.URLParam(r, "type")
	if !idPattern.MatchString(threat) {
		s.fail(w, r, http.StatusBadRequest, "invalid", "The threat type is not one the collector accepts.")
		return
	}
	p, app, ok := s.periodAndApp(w, r, "7d")
	if !ok {
		return
	}
	token := sessionOf(r).Token
	var rep upstream.ThreatReport
	var all upstream.Overview
	err := parallel(
		func() (err error) {
			rep, err = s.deps.Renderer.ThreatReport(r.Context(), token, threat, p.query(app))
			return
		},
		func() (err error) { all, err = s.deps.Renderer.Overview(r.Context(), token, p.query(app)); return },
	)
	if err != nil {
		s.upstreamFail(w, r, "Reading the report", err)
		return
	}
	d := reportData{ThreatReport: rep, Period: p, Periods: periodOptions(p.Key), AppID: app, AllDevices: all.Devices, Share: "—"}
	if d.Type() == "" {
		d.Threat = threat
	}
	if all.Devices > 0 {
		d.Share = fmt.Sprintf("%.1f %%", 100*float64(rep.Devices)/float64(all.Devices))
	}
	base := url.Values{"period": {p.Key}, "threat": {threat}}
	if app != "" {
		base.Set("app_id", app)
	}
	d.EventsURL = "/events?" + base.Encode()
	rows := func(kcs []upstream.KeyCount, param string) []KeyCount {
		out := make([]KeyCount, len(kcs))
		for i, kc := range kcs {
			out[i] = KeyCount{Key: kc.Key, Count: kc.Count}
			if rep.Events > 0 {
				out[i].Share = fmt.Sprintf("%.1f %%", 100*float64(kc.Count)/float64(rep.Events))
			}
			if param != "" && kc.Key != "" {
				v := cloneValues(base)
				v.Set(param, kc.Key)
				out[i].Href = "/events?" + v.Encode()
			}
		}
		return out
	}
	d.Breakdowns = []breakdown{
		{"by-os", "By OS", rows(rep.ByOS, "os")},
		{"by-os-version", "By OS version (major.minor)", rows(rep.ByOSVersion, "")},
		{"by-model", "By device model", rows(rep.ByDeviceModel, "")},
		{"by-app-version", "By app version", rows(rep.ByAppVersion, "")},
	}
	mp := upstream.MapData{}
	for _, c := range rep.ByCountry {
		mp.Countries = append(mp.Countries, struct {
			Country string `json:"country"`
			Events  int64  `json:"events"`
			Devices int64  `json:"devices"`
		}{c.Key, c.Count, 0})
	}
	d.Countries = countriesOf(mp, func(code string) string {
		v := cloneValues(base)
		v.Set("country", code)
		return "/events?" + v.Encode()
	})
	d.Map = drawMap("report-map", threat+" by country, "+p.Label, d.Countries, nil)
	for _, pt := range rep.Series {
		label := pt.T.UTC().Format("2006-01-02")
		if p.Granularity == "hour" {
			label = pt.T.UTC().Format("15:04")
		}
		d.Series = append(d.Series, KeyCount{Key: label, Count: pt.Count})
		d.SeriesMax = maxInt(d.SeriesMax, pt.Count)
	}
	s.render(w, r, http.StatusOK, "report", "Threat report: "+threat, d, "", "")
}

// Type is the report's threat type.
func (d reportData) Type() string { return d.Threat }

// categories are the taxonomy's threat categories (DESIGN.md).
var categories = []string{"platform-integrity", "anti-tampering", "anti-static-analysis", "anti-dynamic-analysis", "network", "malware", "other"}

type categoryData struct {
	Category         string
	Period           period
	Periods          []option
	AppID            string
	Threats          []threatRow
	Sightings, Prev  int64
	Trend, EventsURL string
}

// categoryReportPage is the report of one threat category: its threat
// types' sightings in the period against the period before, each a link to
// its own report, and the category's events in All Events.
func (s *Server) categoryReportPage(w http.ResponseWriter, r *http.Request) {
	cat := chi.URLParam(r, "category")
	if !slices.Contains(categories, cat) {
		s.fail(w, r, http.StatusNotFound, "not_found", "There is no such category: use one of "+strings.Join(categories, ", ")+".")
		return
	}
	p, app, ok := s.periodAndApp(w, r, "7d")
	if !ok {
		return
	}
	token := sessionOf(r).Token
	var cur, prev upstream.Stats
	var tax upstream.Taxonomy
	statsQ := func(v url.Values) url.Values { v.Set("granularity", "day"); return v }
	err := parallel(
		func() (err error) {
			cur, err = s.deps.Renderer.Stats(r.Context(), token, "threat", statsQ(p.query(app)))
			return
		},
		func() (err error) {
			prev, err = s.deps.Renderer.Stats(r.Context(), token, "threat", statsQ(p.prevQuery(app)))
			return
		},
		func() (err error) { tax, err = s.deps.Renderer.Taxonomy(r.Context(), token); return },
	)
	if err != nil {
		s.upstreamFail(w, r, "Reading the category", err)
		return
	}
	base := url.Values{"period": {p.Key}}
	if app != "" {
		base.Set("app_id", app)
	}
	d := categoryData{Category: cat, Period: p, Periods: periodOptions(p.Key), AppID: app}
	for _, t := range threatRows(cur, prev, tax, base) {
		if t.Category == cat || t.Category == "" && cat == "other" {
			d.Threats = append(d.Threats, t)
			d.Sightings += t.Count
			d.Prev += t.Prev
		}
	}
	d.Trend = trend(d.Sightings, d.Prev)
	ev := cloneValues(base)
	ev.Set("category", cat)
	d.EventsURL = "/events?" + ev.Encode()
	s.render(w, r, http.StatusOK, "category", "Threat category: "+cat, d, "", "")
}
