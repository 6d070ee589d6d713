package postgres

import "threatview/platform/wire"

// investigationCTEs fold the rows insertSQL actually inserted (its ins CTE)
// into the investigation rollups of migration events 000013, in the same
// statement and so the same transaction: a redelivered event is not in ins
// and counts nowhere twice. Days and hours are UTC, of occurred_at, like
// the other rollups. An event without threats counts in inv_daily's events
// and under threat '' (all events) only, never as a threat.
const investigationCTEs = `inv AS (
	SELECT (i.occurred_at AT TIME ZONE 'UTC')::date AS day,
		to_char(i.occurred_at AT TIME ZONE 'UTC', 'HH24') AS hour,
		i.app_id, i.device_id, i.user_pseudonym, i.country::char(2) AS country,
		CASE WHEN i.lat IS NULL OR i.lon IS NULL THEN '' ELSE i.lat::text || ',' || i.lon::text END AS cell,
		i.os, btrim(i.os || ' ' || coalesce(i.os_major || '.' || i.os_minor, i.os_version)) AS os_version,
		btrim(i.manufacturer || ' ' || i.device_model) AS device_model, i.app_version, i.threat_types
	FROM ins i
), inv_daily AS (
	INSERT INTO facts.inv_daily AS r (day, app_id, events, threat_events)
	SELECT day, app_id, count(*), count(*) FILTER (WHERE threat_types <> '{}') FROM inv GROUP BY 1, 2
	ON CONFLICT (day, app_id) DO UPDATE
		SET events = r.events + EXCLUDED.events, threat_events = r.threat_events + EXCLUDED.threat_events
	RETURNING 1
), inv_users AS (
	INSERT INTO facts.inv_daily_users (day, app_id, user_pseudonym)
	SELECT DISTINCT day, app_id, user_pseudonym FROM inv WHERE user_pseudonym <> ''
	ON CONFLICT DO NOTHING
	RETURNING 1
), inv_by_threat AS (
	-- each event once under '' (all events), and once under each threat type
	SELECT v.*, t.threat FROM inv v CROSS JOIN LATERAL unnest('{""}'::text[] || v.threat_types) AS t(threat)
), inv_devices AS (
	INSERT INTO facts.inv_device_days (day, app_id, threat, country, cell, device_id)
	SELECT DISTINCT day, app_id, threat, country, cell, device_id FROM inv_by_threat WHERE device_id <> ''
	ON CONFLICT DO NOTHING
	RETURNING 1
), inv_geo AS (
	INSERT INTO facts.inv_geo_daily AS r (day, app_id, threat, country, cell, events)
	SELECT day, app_id, threat, country, cell, count(*) FROM inv_by_threat GROUP BY 1, 2, 3, 4, 5
	ON CONFLICT (day, threat, app_id, country, cell) DO UPDATE SET events = r.events + EXCLUDED.events
	RETURNING 1
), inv_threats AS (
	INSERT INTO facts.inv_threat_daily AS r (day, app_id, threat, dim, key, count)
	SELECT b.day, b.app_id, b.threat, d.dim, d.key, count(*)
	FROM inv_by_threat b CROSS JOIN LATERAL (VALUES ('os', b.os), ('os_version', b.os_version),
		('device_model', b.device_model), ('country', b.country::text), ('app_version', b.app_version),
		('hour', b.hour)) AS d(dim, key)
	WHERE b.threat <> ''
	GROUP BY 1, 2, 3, 4, 5
	ON CONFLICT (day, threat, dim, app_id, key) DO UPDATE SET count = r.count + EXCLUDED.count
	RETURNING 1
)`

// investigationValues fills the batch row's investigation columns
// (batchColumns after payload) from e.
func investigationValues(e *wire.Event, row []any) {
	var osMajor, osMinor, lat, lon any
	if major, minor, ok := wire.ParseOSVersion(e.Device.OSVersion); ok {
		osMajor, osMinor = int16(major), int16(minor)
	}
	if e.Location != nil {
		lat, lon = float32(e.Location.Lat), float32(e.Location.Lon)
	}
	row[0], row[1], row[2], row[3], row[4], row[5], row[6] =
		e.SessionID(), e.UserPseudonym(), e.Device.Language, osMajor, osMinor, lat, lon
}
