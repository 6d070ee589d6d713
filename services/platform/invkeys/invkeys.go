// Package invkeys is the one definition of the investigation rollups' keys
// (migration events 000013: facts.inv_daily, inv_daily_users,
// inv_device_days, inv_geo_daily, inv_threat_daily): the SQL that turns
// events.events rows into the rows of each rollup. The processor adds what
// it selects for the rows it inserts; the privacy service subtracts what it
// selects for the rows it deletes. Both use these fragments, so an erasure
// takes away exactly what the write added.
package invkeys

// Columns are the events.events columns Keys reads from its source, in the
// form a RETURNING list or a SELECT list takes.
const Columns = `occurred_at, app_id, app_version, country, manufacturer, device_model, os, os_version,
	device_id, user_pseudonym, os_major, os_minor, lat, lon, threat_types`

// Keys returns two CTEs over src (a CTE or table with Columns, e.g. an
// INSERT's or DELETE's RETURNING): inv, one row per event with its keys,
// and inv_by_threat, each event once under the blank threat (all events) and
// once under each of its threat types. Days and hours are UTC, of
// occurred_at, like the other rollups. src is a constant of the caller's
// statement, never input.
func Keys(src string) string {
	return `inv AS (
	SELECT (i.occurred_at AT TIME ZONE 'UTC')::date AS day,
		to_char(i.occurred_at AT TIME ZONE 'UTC', 'HH24') AS hour,
		i.app_id, i.device_id, i.user_pseudonym, i.country::char(2) AS country,
		CASE WHEN i.lat IS NULL OR i.lon IS NULL THEN '' ELSE i.lat::text || ',' || i.lon::text END AS cell,
		i.os, btrim(i.os || ' ' || coalesce(i.os_major || '.' || i.os_minor, i.os_version)) AS os_version,
		btrim(i.manufacturer || ' ' || i.device_model) AS device_model, i.app_version, i.threat_types
	FROM ` + src + ` i
), inv_by_threat AS (
	SELECT v.*, t.threat FROM inv v CROSS JOIN LATERAL unnest('{""}'::text[] || v.threat_types) AS t(threat)
)`
}

// The selects below read the CTEs of Keys. Each names its key columns
// first, in the order of the rollup's primary key's columns as listed
// under it, then its count, so a caller can lock or join by them.

// Daily is facts.inv_daily's rows: events and threat events (an event with
// at least one threat type) per (day, app_id).
const Daily = `SELECT day, app_id, count(*) AS events, count(*) FILTER (WHERE threat_types <> '{}') AS threat_events
	FROM inv GROUP BY 1, 2`

// DailyUsers is facts.inv_daily_users's rows: (day, app_id,
// user_pseudonym) of the events with a user.
const DailyUsers = `SELECT DISTINCT day, app_id, user_pseudonym FROM inv WHERE user_pseudonym <> ''`

// DeviceDays is facts.inv_device_days's rows: (day, app_id, threat,
// country, cell, device_id) of the events with a device.
const DeviceDays = `SELECT DISTINCT day, app_id, threat, country, cell, device_id FROM inv_by_threat WHERE device_id <> ''`

// Geo is facts.inv_geo_daily's rows: events per (day, app_id, threat,
// country, cell).
const Geo = `SELECT day, app_id, threat, country, cell, count(*) AS events FROM inv_by_threat GROUP BY 1, 2, 3, 4, 5`

// Threats is facts.inv_threat_daily's rows: threat events per (day,
// app_id, threat, dim, key), each counted once per type in each dimension
// (os, os_version, device_model, country, app_version, hour), so a
// dimension's sum is the type's event count. Events without threats count
// nowhere here.
const Threats = `SELECT b.day, b.app_id, b.threat, d.dim, d.key, count(*) AS count
	FROM inv_by_threat b CROSS JOIN LATERAL (VALUES ('os', b.os), ('os_version', b.os_version),
		('device_model', b.device_model), ('country', b.country::text), ('app_version', b.app_version),
		('hour', b.hour)) AS d(dim, key)
	WHERE b.threat <> ''
	GROUP BY 1, 2, 3, 4, 5`
