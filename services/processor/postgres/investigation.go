package postgres

import (
	"threatview/platform/invkeys"
	"threatview/platform/wire"
)

// investigationCTEs fold the rows insertSQL actually inserted (its ins CTE)
// into the investigation rollups of migration events 000013, in the same
// statement and so the same transaction: a redelivered event is not in ins
// and counts nowhere twice. The keys (days and hours UTC, of occurred_at;
// an event without threats in inv_daily's events and under the blank threat only,
// never as a threat) are platform/invkeys', which the privacy service's
// erasure subtracts with.
var investigationCTEs = invkeys.Keys("ins") + `, inv_daily AS (
	INSERT INTO facts.inv_daily AS r (day, app_id, events, threat_events)
	` + invkeys.Daily + `
	ON CONFLICT (day, app_id) DO UPDATE
		SET events = r.events + EXCLUDED.events, threat_events = r.threat_events + EXCLUDED.threat_events
	RETURNING 1
), inv_users AS (
	INSERT INTO facts.inv_daily_users (day, app_id, user_pseudonym)
	` + invkeys.DailyUsers + `
	ON CONFLICT DO NOTHING
	RETURNING 1
), inv_devices AS (
	INSERT INTO facts.inv_device_days (day, app_id, threat, country, cell, device_id)
	` + invkeys.DeviceDays + `
	ON CONFLICT DO NOTHING
	RETURNING 1
), inv_geo AS (
	INSERT INTO facts.inv_geo_daily AS r (day, app_id, threat, country, cell, events)
	` + invkeys.Geo + `
	ON CONFLICT (day, threat, app_id, country, cell) DO UPDATE SET events = r.events + EXCLUDED.events
	RETURNING 1
), inv_threats AS (
	INSERT INTO facts.inv_threat_daily AS r (day, app_id, threat, dim, key, count)
	` + invkeys.Threats + `
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
