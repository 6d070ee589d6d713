package postgres

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/platform/wire"
	"threatview/visualrenderer"
)

// eventColumns are the columns scanEvent reads, in order.
const eventColumns = `e.id::text, e.type, e.occurred_at, e.received_at, e.app_id, e.app_version, e.device_id,
	e.device_model, e.manufacturer, e.os, e.os_version, e.language, e.session_id, e.user_pseudonym,
	e.country, e.lat, e.lon, e.threat_types`

func scanEvent(row pgx.Row, tax visualrenderer.Taxonomy) (visualrenderer.Event, error) {
	var e visualrenderer.Event
	var session, user string
	var lat, lon *float32
	var types []string
	err := row.Scan(&e.EventID, &e.Type, &e.OccurredAt, &e.ReceivedAt, &e.App.ID, &e.App.Version, &e.Device.ID,
		&e.Device.Model, &e.Device.Manufacturer, &e.Device.OS, &e.Device.OSVersion, &e.Device.Language,
		&session, &user, &e.Country, &lat, &lon, &types)
	if err != nil {
		return e, err
	}
	e.OccurredAt, e.ReceivedAt = e.OccurredAt.UTC(), e.ReceivedAt.UTC()
	if session != "" {
		e.Session = &wire.Session{ID: session}
	}
	if user != "" {
		e.User = &wire.User{Pseudonym: user}
	}
	if lat != nil && lon != nil {
		e.Location = &wire.Location{Lat: round6(float64(*lat)), Lon: round6(float64(*lon))}
	}
	e.Threats = make([]visualrenderer.ThreatClass, 0, len(types))
	for _, t := range types {
		e.Threats = append(e.Threats, tax.Class(t))
	}
	e.SetCursor(visualrenderer.Cursor{ReceivedAt: e.ReceivedAt, ID: e.EventID})
	return e, nil
}

// round6 writes a real column's value as it was stored (48.1, not
// 48.099998474121094).
func round6(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 7, 32), 64)
	return v
}

// where builds the filter's conditions on events.events e; args continue
// from the given ones.
func where(f visualrenderer.EventFilter, args []any) ([]string, []any) {
	var conds []string
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	for _, c := range []struct{ col, v string }{
		{"e.app_id", f.AppID}, {"e.type", f.Type}, {"e.device_id", f.DeviceID},
		{"e.session_id", f.SessionID}, {"e.country", f.Country}, {"e.os", f.OS},
	} {
		if c.v != "" {
			conds = append(conds, c.col+" = "+arg(c.v))
		}
	}
	if len(f.Users) > 0 {
		conds = append(conds, "e.user_pseudonym = ANY("+arg(f.Users)+") AND e.user_pseudonym <> ''")
	}
	if f.DeviceID != "" {
		conds = append(conds, "e.device_id <> ''") // the partial index's predicate
	}
	if f.SessionID != "" {
		conds = append(conds, "e.session_id <> ''")
	}
	if f.Threat != "" || f.Category != "" {
		conds = append(conds, "e.threat_types <> '{}'")
	}
	if f.Threat != "" {
		conds = append(conds, "e.threat_types @> ARRAY["+arg(f.Threat)+"]::text[]")
	}
	if f.Category != "" {
		conds = append(conds, `EXISTS (SELECT 1 FROM unnest(e.threat_types) AS t(type)
			WHERE coalesce((SELECT x.category FROM events.threat_taxonomy x WHERE x.type = t.type), 'other') = `+arg(f.Category)+`)`)
	}
	return conds, args
}

// SearchEvents implements visualrenderer.Investigator.
func (s *Store) SearchEvents(ctx context.Context, f visualrenderer.EventFilter, tax visualrenderer.Taxonomy) (visualrenderer.EventPage, error) {
	args := []any{f.From, f.To}
	conds, args := where(f, args)
	conds = append([]string{"e.received_at >= $1", "e.received_at < $2"}, conds...)
	if f.After != nil {
		args = append(args, f.After.ReceivedAt, f.After.ID)
		conds = append(conds, fmt.Sprintf("(e.received_at, e.id) < ($%d, $%d::uuid)", len(args)-1, len(args)))
	}
	args = append(args, f.Limit+1)
	order := fmt.Sprintf(" ORDER BY e.received_at DESC, e.id DESC LIMIT $%d", len(args))
	q := `SELECT ` + eventColumns + ` FROM events.events e WHERE ` + strings.Join(conds, " AND ") + order
	if f.Threat != "" {
		q = byThreat(conds, f.Threat, &args, order)
	}
	evs, err := s.queryEvents(ctx, q, args, tax)
	if err != nil {
		return visualrenderer.EventPage{}, err
	}
	page := visualrenderer.EventPage{Events: evs}
	if len(evs) > f.Limit {
		page.Events = evs[:f.Limit]
		page.NextCursor = evs[f.Limit-1].Cursor().String()
	}
	return page, nil
}

// byThreat is the search for one threat type (migration events 000015): the
// events whose first type it is, newest first from events_by_first_threat,
// and those with it in second place or later, from the events with two or
// more types (events_multi_threat_by_time); each part stops at the page's
// size and the two are merged. Without it the database walks every threat
// event of the range testing each one's types.
func byThreat(conds []string, threat string, args *[]any, order string) string {
	*args = append(*args, threat)
	t := "$" + strconv.Itoa(len(*args))
	where := strings.Join(conds, " AND ")
	return `SELECT * FROM ((SELECT ` + eventColumns + ` FROM events.events e WHERE ` + where +
		` AND e.threat_types[1] = ` + t + order + `) UNION ALL (SELECT ` + eventColumns + ` FROM events.events e WHERE ` + where +
		` AND cardinality(e.threat_types) > 1 AND e.threat_types[1] <> ` + t + order + `)) e` +
		strings.Replace(order, "e.id DESC", "e.id::uuid DESC", 1) // the parts' id is text
}

// EventsSince implements visualrenderer.Investigator.
func (s *Store) EventsSince(ctx context.Context, f visualrenderer.EventFilter, since time.Time, limit int, tax visualrenderer.Taxonomy) ([]visualrenderer.Event, error) {
	conds, args := where(f, []any{since})
	conds = append([]string{"e.received_at >= $1"}, conds...)
	args = append(args, limit)
	q := `SELECT ` + eventColumns + ` FROM events.events e WHERE ` + strings.Join(conds, " AND ") +
		fmt.Sprintf(" ORDER BY e.received_at, e.id LIMIT $%d", len(args))
	return s.queryEvents(ctx, q, args, tax)
}

func (s *Store) queryEvents(ctx context.Context, q string, args []any, tax visualrenderer.Taxonomy) ([]visualrenderer.Event, error) {
	// sql: q is eventColumns and where's constant conditions with numbered placeholders; every value is an argument.
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, unavailable("search events", err)
	}
	defer rows.Close()
	evs := []visualrenderer.Event{}
	for rows.Next() {
		e, err := scanEvent(rows, tax)
		if err != nil {
			return nil, unavailable("search events", err)
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("search events", err)
	}
	return evs, nil
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, visualrenderer.ErrUnavailable, err)
}

// timelineRecent is how many of a subject's latest events a timeline shows.
const timelineRecent = 50

// Timeline implements visualrenderer.Investigator.
func (s *Store) Timeline(ctx context.Context, kind string, ids []string, appID string, tax visualrenderer.Taxonomy) (visualrenderer.Timeline, error) {
	col := map[string]string{"device": "device_id", "session": "session_id", "user": "user_pseudonym"}[kind]
	if col == "" || len(ids) == 0 {
		return visualrenderer.Timeline{}, fmt.Errorf("timeline of %q: %w", kind, visualrenderer.ErrNotFound)
	}
	cond := "e." + col + " = ANY($1) AND e." + col + " <> '' AND ($2 = '' OR e.app_id = $2)"
	t := visualrenderer.Timeline{Kind: kind, ID: ids[0], Threats: map[string]int64{}, Apps: []visualrenderer.TimelineApp{}}
	var apps, versions, oses, countries []string
	// sql: cond names a column of the fixed map above; the ids and the app are arguments.
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(min(e.received_at), 'epoch'), coalesce(max(e.received_at), 'epoch'),
			coalesce(array_agg(DISTINCT e.app_id), '{}'), coalesce(array_agg(DISTINCT e.app_id || ' ' || e.app_version), '{}'),
			coalesce(array_agg(DISTINCT e.os) FILTER (WHERE e.os <> ''), '{}'), coalesce(array_agg(DISTINCT e.country::text), '{}')
		FROM events.events e WHERE `+cond, ids, appID).Scan(&t.Events, &t.FirstSeen, &t.LastSeen, &apps, &versions, &oses, &countries)
	if err != nil {
		return t, unavailable("timeline", err)
	}
	if t.Events == 0 {
		return t, fmt.Errorf("timeline of a %s: %w", kind, visualrenderer.ErrNotFound)
	}
	t.FirstSeen, t.LastSeen, t.OS, t.Countries = t.FirstSeen.UTC(), t.LastSeen.UTC(), oses, countries
	for _, a := range apps {
		app := visualrenderer.TimelineApp{ID: a, Versions: []string{}}
		for _, v := range versions {
			if ver, ok := strings.CutPrefix(v, a+" "); ok && ver != "" {
				app.Versions = append(app.Versions, ver)
			}
		}
		t.Apps = append(t.Apps, app)
	}
	// sql: cond names a column of the fixed map above; the ids and the app are arguments.
	rows, err := s.pool.Query(ctx, `SELECT t.type, count(*) FROM events.events e, unnest(e.threat_types) AS t(type)
		WHERE e.threat_types <> '{}' AND `+cond+` GROUP BY 1`, ids, appID)
	if err != nil {
		return t, unavailable("timeline", err)
	}
	for rows.Next() {
		var typ string
		var n int64
		if err := rows.Scan(&typ, &n); err != nil {
			rows.Close()
			return t, unavailable("timeline", err)
		}
		t.Threats[typ] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return t, unavailable("timeline", err)
	}
	t.Recent, err = s.queryEvents(ctx, `SELECT `+eventColumns+` FROM events.events e WHERE `+cond+
		` ORDER BY e.received_at DESC, e.id DESC LIMIT `+strconv.Itoa(timelineRecent), []any{ids, appID}, tax)
	return t, err
}

// Overview implements visualrenderer.Investigator. Unique users and
// devices of one day over all apps are counted per day (migration events
// 000021); of longer ranges they come from the recency tables (migration
// events 000015, 000020) when they can say exactly (a range ending today,
// or any range no subject was seen twice after), else from count(DISTINCT)
// over the day tables: exact either way.
func (s *Store) Overview(ctx context.Context, q visualrenderer.RollupQuery) (visualrenderer.Overview, error) {
	o := visualrenderer.Overview{From: q.From, To: q.To}
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(events), 0), coalesce(sum(threat_events), 0),
			count(DISTINCT app_id) FILTER (WHERE events > 0)
		FROM facts.inv_daily WHERE day >= $1 AND day < $2 AND ($3 = '' OR app_id = $3)`,
		q.From, q.To, q.AppID).Scan(&o.Events, &o.ThreatEvents, &o.Apps)
	if err != nil {
		return o, unavailable("overview", err)
	}
	if q.AppID == "" && q.To.Sub(q.From) <= 24*time.Hour {
		// At most one day over all apps: counted as they came (migration
		// events 000021), the day before yesterday as fast as today.
		err = s.pool.QueryRow(ctx, `SELECT coalesce(sum(users), 0), coalesce(sum(devices), 0) FROM facts.inv_daily_all
			WHERE day >= $1 AND day < $2`, q.From, q.To).Scan(&o.Users, &o.Devices)
		if err != nil {
			return o, unavailable("overview", err)
		}
		return o, nil
	}
	if o.Users, err = s.distinct(ctx, q, recentUsers, nil); err != nil {
		return o, unavailable("overview", err)
	}
	if o.Devices, err = s.distinct(ctx, q, recentDevices, []string{""}); err != nil {
		return o, unavailable("overview", err)
	}
	return o, nil
}

// A recency counts the distinct subjects (users, or devices of a list of
// threat types) seen in a range of days.
type recency struct {
	recent, days, subject string
	threats               bool   // the tables have a threat column
	pairs, n              string // the subjects per pair of recent days, and its count column
}

var (
	recentUsers = recency{recent: "facts.inv_user_recent", days: "facts.inv_daily_users", subject: "user_pseudonym",
		pairs: "facts.inv_user_recent_days", n: "users"}
	recentDevices = recency{recent: "facts.inv_device_recent", days: "facts.inv_device_days", subject: "device_id", threats: true,
		pairs: "facts.inv_device_recent_days", n: "devices"}
)

// daysIn is the days of [$1, $2) as a list: with it and equalities on the
// next key columns, a day table's primary key is entered once per day at
// the rows asked for instead of read across the range.
const daysIn = `day = ANY(ARRAY(SELECT generate_series($1::date, $2::date - 1, interval '1 day')::date))`

// ambiguousLimit bounds the subjects distinct looks up one by one (see
// there; one index descent per app and subject); a range with more is
// counted over the day table.
var ambiguousLimit = 1000

// distinct returns the number of distinct subjects of r seen in the days of
// [q.From, q.To) in q.AppID (blank: all apps) with one of threats (for
// devices; the blank threat is any event). One app's are counted over its
// rows of the day table. Over all apps, users and the devices of one type
// are summed from the subjects per pair of recent days when that tells
// them all (below). Else a subject's two most recent days
// (migration events 000015) say whether it was seen in the range, unless
// both are at or after q.To: such a subject (events dated after today, or a
// range ending before yesterday) is looked up in the day table by its key
// in each app (facts.inv_apps), when there are at most ambiguousLimit of
// them; else the day table is counted.
func (s *Store) distinct(ctx context.Context, q visualrenderer.RollupQuery, r recency, threats []string) (int64, error) {
	of, dayOf, count := "", "", "count(*)"
	args := []any{q.From, q.To}
	if r.threats {
		args = append(args, threats)
		of, dayOf = " AND a.threat = ANY($3)", " AND d.threat = a.threat"
		if len(threats) > 1 {
			count = "count(DISTINCT a." + r.subject + ")"
		}
	}
	var n int64
	if q.AppID != "" {
		args = append(args, q.AppID)
		// sql: the tables, columns and conditions are recency's constants; every value is an argument.
		err := s.pool.QueryRow(ctx, `SELECT count(DISTINCT `+r.subject+`) FROM `+r.days+` a
			WHERE day >= $1 AND day < $2 AND `+daysIn+of+` AND app_id = $`+strconv.Itoa(len(args)), args...).Scan(&n)
		return n, err
	}
	if len(threats) <= 1 {
		// One threat type (or users): the subjects per pair of recent days
		// (migration events 000020) sum to the answer, unless some have
		// both days at or after the range's end.
		var ambiguous int64
		// sql: as above.
		err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(`+r.n+`) FILTER (WHERE last_day < $2 OR (prev_day >= $1 AND prev_day < $2)), 0),
				coalesce(sum(`+r.n+`) FILTER (WHERE prev_day >= $2), 0)
			FROM `+r.pairs+` a WHERE last_day >= $1`+of, args...).Scan(&n, &ambiguous)
		if err != nil || ambiguous == 0 {
			return n, err
		}
	}
	var ambiguous int
	// sql: as above.
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+r.recent+` a
		WHERE a.last_day >= $1 AND a.last_day >= $2 AND a.prev_day >= $2`+of+` LIMIT `+strconv.Itoa(ambiguousLimit+1)+`) x`,
		args...).Scan(&ambiguous)
	if err != nil {
		return 0, err
	}
	if ambiguous > ambiguousLimit {
		// sql: as above.
		err = s.pool.QueryRow(ctx, `SELECT count(DISTINCT `+r.subject+`) FROM `+r.days+` a
			WHERE day >= $1 AND day < $2`+of, args...).Scan(&n)
		return n, err
	}
	// OFFSET 0 keeps the look-up a per-subject probe, evaluated for the
	// ambiguous subjects only: without it the planner may hash the whole
	// day table's range instead.
	// sql: as above.
	err = s.pool.QueryRow(ctx, `SELECT `+count+` FROM `+r.recent+` a WHERE a.last_day >= $1`+of+`
		AND (a.last_day < $2 OR (a.prev_day >= $1 AND a.prev_day < $2)
			OR (a.prev_day >= $2 AND EXISTS (SELECT 1 FROM `+r.days+` d
				WHERE d.app_id = ANY((SELECT facts.inv_apps())::text[]) AND d.`+r.subject+` = a.`+r.subject+dayOf+`
				  AND d.day >= $1 AND d.day < $2 OFFSET 0)))`, args...).Scan(&n)
	return n, err
}

// Map implements visualrenderer.Investigator. One app's rows are found by
// its key in the per-app tables. Over all apps the map of all events sums
// each place's devices per pair of recent days (migration events 000018),
// one day or seven alike, unless some device's two most recent days in a
// place are both at or after the range's end (events dated ahead, a range
// in the past); then, and for a threat type's map, the distinct devices of
// the day rows are counted.
func (s *Store) Map(ctx context.Context, q visualrenderer.RollupQuery) (visualrenderer.MapData, error) {
	m := visualrenderer.MapData{From: q.From, To: q.To, K: q.K, Countries: []visualrenderer.MapCountry{}, Cells: []visualrenderer.MapCell{}}
	byCountry, byCell := mapOfApp()
	switch {
	case q.AppID != "":
	case q.Threat != "":
		// The places' recency is kept for all events only.
		byCountry, byCell = mapOverApps()
	default:
		var ambiguous int64
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(devices), 0) FROM facts.inv_geo_place_days
			WHERE threat = '' AND last_day >= $1 AND prev_day >= $1`, q.To).Scan(&ambiguous); err != nil {
			return m, unavailable("map", err)
		}
		byCountry, byCell = mapOfRecency()
		if ambiguous > 0 {
			byCountry, byCell = mapOverApps()
		}
	}
	// sql: byCountry and byCell are the constants of the functions below; every value is an argument.
	rows, err := s.pool.Query(ctx, byCountry, q.From, q.To, q.Threat, q.AppID)
	if err != nil {
		return m, unavailable("map", err)
	}
	for rows.Next() {
		var c visualrenderer.MapCountry
		if err := rows.Scan(&c.Country, &c.Events, &c.Devices); err != nil {
			rows.Close()
			return m, unavailable("map", err)
		}
		m.Countries = append(m.Countries, c)
	}
	rows.Close()
	// A cell is shown only when at least K distinct devices were in it.
	// sql: as above.
	rows, err = s.pool.Query(ctx, byCell, q.From, q.To, q.Threat, q.AppID, q.K)
	if err != nil {
		return m, unavailable("map", err)
	}
	defer rows.Close()
	for rows.Next() {
		var cell string
		var c visualrenderer.MapCell
		if err := rows.Scan(&cell, &c.Events, &c.Devices); err != nil {
			return m, unavailable("map", err)
		}
		lat, lon, _ := strings.Cut(cell, ",")
		c.Lat, _ = strconv.ParseFloat(lat, 64)
		c.Lon, _ = strconv.ParseFloat(lon, 64)
		m.Cells = append(m.Cells, c)
	}
	if err := rows.Err(); err != nil {
		return m, unavailable("map", err)
	}
	return m, nil
}

// The map's two queries ($1, $2 the days, $3 the threat type, blank for
// any event, $4 the app, blank for all; the cells' $5 is K): the countries
// with their events and distinct devices, and the grid cells with at least
// K distinct devices (a cell is shown only then), each busiest first.

// mapOfApp reads one app's rows of the per-app tables, entered by its key
// once per day.
func mapOfApp() (byCountry, byCell string) {
	dev := `SELECT %s, count(DISTINCT device_id) AS devices FROM facts.inv_device_days
		WHERE day >= $1 AND day < $2 AND threat = $3 AND app_id = $4 AND ` + daysIn
	ev := `SELECT %s, sum(events) AS events FROM facts.inv_geo_daily
		WHERE day >= $1 AND day < $2 AND threat = $3 AND app_id = $4 AND ` + daysIn
	return mapJoin(fmt.Sprintf(ev, "country")+` GROUP BY 1`, fmt.Sprintf(dev, "country")+` GROUP BY 1`),
		mapCells(fmt.Sprintf(dev, "cell")+` AND cell <> '' GROUP BY 1 HAVING count(DISTINCT device_id) >= $5`,
			fmt.Sprintf(ev, "cell"))
}

// mapOverApps counts the distinct devices of the day rows of every app;
// the events are the counts over apps.
func mapOverApps() (byCountry, byCell string) {
	dev := `SELECT %s, count(DISTINCT device_id) AS devices FROM facts.inv_device_days
		WHERE day >= $1 AND day < $2 AND threat = $3 AND $4 = ''`
	return mapJoin(`SELECT country::text, sum(events) AS events FROM facts.inv_geo_country_all
			WHERE day >= $1 AND day < $2 AND threat = $3 AND $4 = '' GROUP BY 1`, fmt.Sprintf(dev, "country")+` GROUP BY 1`),
		mapCells(fmt.Sprintf(dev, "cell")+` AND cell <> '' GROUP BY 1 HAVING count(DISTINCT device_id) >= $5`, mapCellEvents)
}

// mapOfRecency sums each place's devices per pair of recent days (a place
// is a country or, with a comma, a cell): a device was there in the range
// when its last day is in it, or its last day is after it and its previous
// day in it.
func mapOfRecency() (byCountry, byCell string) {
	dev := `SELECT place AS %s, sum(devices) AS devices FROM facts.inv_geo_place_days
		WHERE threat = $3 AND last_day >= $1 AND (last_day < $2 OR (prev_day >= $1 AND prev_day < $2))
		  AND $4 = '' AND place %s LIKE '%%,%%' GROUP BY 1`
	return mapJoin(`SELECT country::text, sum(events) AS events FROM facts.inv_geo_country_all
			WHERE day >= $1 AND day < $2 AND threat = $3 AND $4 = '' GROUP BY 1`, fmt.Sprintf(dev, "country", "NOT")),
		mapCells(fmt.Sprintf(dev, "cell", "")+` HAVING sum(devices) >= $5`, mapCellEvents)
}

// mapCellEvents are the cells' events over all apps.
const mapCellEvents = `SELECT cell, sum(events) AS events FROM facts.inv_geo_daily_all WHERE day >= $1 AND day < $2 AND threat = $3 AND $4 = ''`

// mapJoin lists the countries with events and their devices.
func mapJoin(ev, dev string) string {
	return `WITH ev AS (` + ev + `), dev AS (` + dev + `)
		SELECT ev.country::text, ev.events, coalesce(dev.devices, 0) FROM ev LEFT JOIN dev ON dev.country = ev.country::text
		ORDER BY 2 DESC, 1`
}

// mapCells lists the cells of dev (at least K devices) with their events
// (ev, whose WHERE the cell condition extends).
func mapCells(dev, ev string) string {
	return `WITH dev AS (` + dev + `), ev AS (` + ev + ` AND cell IN (SELECT cell FROM dev) GROUP BY 1)
		SELECT dev.cell, coalesce(ev.events, 0), dev.devices FROM dev LEFT JOIN ev USING (cell) ORDER BY 2 DESC, 1`
}

// ThreatReport implements visualrenderer.Investigator.
func (s *Store) ThreatReport(ctx context.Context, q visualrenderer.RollupQuery, sel visualrenderer.ThreatSelection) (visualrenderer.ThreatReport, error) {
	match := sel.Match
	r := visualrenderer.ThreatReport{From: q.From, To: q.To, Granularity: "day"}
	hourly := q.To.Sub(q.From) <= 2*24*time.Hour
	if hourly {
		r.Granularity = "hour"
	}
	// Only the types asked for are read: one type, or a category's listed
	// types and, for other, every type the taxonomy does not list.
	// Over all apps the summary over apps is read: one row per key and
	// day, not one per app.
	table, app := "facts.inv_threat_daily", "app_id = $3"
	if q.AppID == "" {
		table, app = "facts.inv_threat_daily_all", "$3 = ''"
	}
	// Named types only: every key column up to the app is an equality (a
	// list of days, the types, the six dimensions), so the primary key is
	// entered once per day, type and dimension at the app's rows instead
	// of read across every app's rows of the range.
	exact := ""
	if !sel.Unlisted {
		exact = ` AND ` + daysIn + ` AND dim = ANY('{os,os_version,device_model,country,app_version,hour}')`
	}
	// sql: table, app and exact are the constants above; every value is an argument.
	rows, err := s.pool.Query(ctx, `SELECT day, threat, dim, key, sum(count)::bigint FROM `+table+`
		WHERE day >= $1::date AND day < $2::date AND `+app+exact+`
		  AND (threat = ANY($4) OR ($5 AND NOT threat = ANY($6)))
		GROUP BY 1, 2, 3, 4`, q.From, q.To, q.AppID, sel.Types, sel.Unlisted, sel.Listed)
	if err != nil {
		return r, unavailable("threat report", err)
	}
	by := map[string]map[string]int64{}
	series := map[time.Time]int64{}
	types := map[string]bool{}
	for rows.Next() {
		var day time.Time
		var threat, dim, key string
		var n int64
		if err := rows.Scan(&day, &threat, &dim, &key, &n); err != nil {
			rows.Close()
			return r, unavailable("threat report", err)
		}
		if !match(threat) {
			continue
		}
		types[threat] = true
		if dim == "hour" {
			t := day.UTC()
			if hourly {
				h, _ := strconv.Atoi(key)
				t = t.Add(time.Duration(h) * time.Hour)
			}
			series[t] += n
			continue
		}
		if by[dim] == nil {
			by[dim] = map[string]int64{}
		}
		by[dim][key] += n
		if dim == "os" {
			r.Events += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, unavailable("threat report", err)
	}
	list := make([]string, 0, len(types))
	for t := range types {
		list = append(list, t)
	}
	sort.Strings(list)
	if r.Devices, err = s.distinct(ctx, q, recentDevices, list); err != nil {
		return r, unavailable("threat report", err)
	}
	r.ByOS, r.ByOSVersion, r.ByDeviceModel = sorted(by["os"]), sorted(by["os_version"]), sorted(by["device_model"])
	r.ByCountry, r.ByAppVersion = sorted(by["country"]), sorted(by["app_version"])
	r.Series = []visualrenderer.TimeCount{}
	for t, n := range series {
		r.Series = append(r.Series, visualrenderer.TimeCount{T: t, Count: n})
	}
	sort.Slice(r.Series, func(i, j int) bool { return r.Series[i].T.Before(r.Series[j].T) })
	return r, nil
}

// sorted lists m largest first (then by key).
func sorted(m map[string]int64) []visualrenderer.KeyCount {
	out := make([]visualrenderer.KeyCount, 0, len(m))
	for k, n := range m {
		out = append(out, visualrenderer.KeyCount{Key: k, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Taxonomy implements visualrenderer.Investigator.
func (s *Store) Taxonomy(ctx context.Context) (visualrenderer.Taxonomy, error) {
	rows, err := s.pool.Query(ctx, `SELECT type, category, severity FROM events.threat_taxonomy`)
	if err != nil {
		return nil, unavailable("taxonomy", err)
	}
	defer rows.Close()
	t := visualrenderer.Taxonomy{}
	for rows.Next() {
		var c visualrenderer.ThreatClass
		if err := rows.Scan(&c.Type, &c.Category, &c.Severity); err != nil {
			return nil, unavailable("taxonomy", err)
		}
		t[c.Type] = c
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("taxonomy", err)
	}
	return t, nil
}

// SetThreatClass implements visualrenderer.Investigator. The pool is
// read-only by default; this one transaction is read-write (the renderer's
// role may write events.threat_taxonomy only).
func (s *Store) SetThreatClass(ctx context.Context, c visualrenderer.ThreatClass, by string, audit func(context.Context) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadWrite})
	if err != nil {
		return unavailable("set threat class", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, `INSERT INTO events.threat_taxonomy (type, category, severity, updated_at, updated_by)
		VALUES ($1, $2, $3, now(), $4)
		ON CONFLICT (type) DO UPDATE SET category = EXCLUDED.category, severity = EXCLUDED.severity,
			updated_at = now(), updated_by = EXCLUDED.updated_by`, c.Type, c.Category, c.Severity, by); err != nil {
		return unavailable("set threat class", err)
	}
	if err := audit(ctx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return unavailable("set threat class", err)
	}
	return nil
}
