package testenv

// InvSummaryChecks are the investigation summaries over apps (migrations
// events 000015, 000018, 000020 and 000021, kept by triggers on the per-app day tables),
// each as a query counting the keys that differ from a recount of the day
// tables: 0 when exact. The processor's writes and the renderer's readers
// check the same definitions.
var InvSummaryChecks = []struct{ Name, Query string }{
	{"threats over apps", `SELECT count(*) FROM (
			SELECT day, threat, dim, key, sum(count) AS count FROM facts.inv_threat_daily GROUP BY 1, 2, 3, 4
		) a FULL JOIN facts.inv_threat_daily_all b USING (day, threat, dim, key)
		WHERE coalesce(a.count, 0) <> coalesce(b.count, 0)`},
	{"cells' events over apps", `SELECT count(*) FROM (
			SELECT day, threat, country, cell, sum(events) AS events FROM facts.inv_geo_daily GROUP BY 1, 2, 3, 4
		) a FULL JOIN facts.inv_geo_daily_all b USING (day, threat, country, cell)
		WHERE coalesce(a.events, 0) <> coalesce(b.events, 0)`},
	{"places' two most recent days", `SELECT count(*) FROM (
			SELECT d.threat, p.place, d.device_id, (array_agg(DISTINCT d.day ORDER BY d.day DESC))[1:2] AS days
			FROM facts.inv_device_days d, LATERAL (VALUES (d.country::text), (nullif(d.cell, ''))) p(place)
			WHERE d.threat = '' AND p.place IS NOT NULL GROUP BY 1, 2, 3
		) a FULL JOIN facts.inv_geo_place_recent b USING (threat, place, device_id)
		WHERE a.days[1] IS DISTINCT FROM b.last_day OR a.days[2] IS DISTINCT FROM b.prev_day`},
	{"places' devices per pair of days", `SELECT count(*) FROM (
			SELECT threat, last_day, place, coalesce(prev_day, '-infinity') AS prev_day, count(*) AS devices
			FROM facts.inv_geo_place_recent GROUP BY 1, 2, 3, 4
		) a FULL JOIN facts.inv_geo_place_days b USING (threat, last_day, place, prev_day)
		WHERE coalesce(a.devices, 0) <> coalesce(b.devices, 0)`},
	{"devices per pair of days", `SELECT count(*) FROM (
			SELECT threat, last_day, coalesce(prev_day, '-infinity') AS prev_day, count(*) AS devices
			FROM facts.inv_device_recent GROUP BY 1, 2, 3
		) a FULL JOIN facts.inv_device_recent_days b USING (threat, last_day, prev_day)
		WHERE coalesce(a.devices, 0) <> coalesce(b.devices, 0)`},
	{"users per pair of days", `SELECT count(*) FROM (
			SELECT last_day, coalesce(prev_day, '-infinity') AS prev_day, count(*) AS users
			FROM facts.inv_user_recent GROUP BY 1, 2
		) a FULL JOIN facts.inv_user_recent_days b USING (last_day, prev_day)
		WHERE coalesce(a.users, 0) <> coalesce(b.users, 0)`},
	{"devices and users per day over apps", `SELECT count(*) FROM (
			SELECT day, count(DISTINCT device_id) AS devices FROM facts.inv_device_days WHERE threat = '' GROUP BY 1
		) d FULL JOIN (
			SELECT day, count(DISTINCT user_pseudonym) AS users FROM facts.inv_daily_users GROUP BY 1
		) u USING (day) FULL JOIN facts.inv_daily_all b USING (day)
		WHERE coalesce(d.devices, 0) <> coalesce(b.devices, 0) OR coalesce(u.users, 0) <> coalesce(b.users, 0)`},
	{"countries' events over apps", `SELECT count(*) FROM (
			SELECT day, threat, country, sum(events) AS events FROM facts.inv_geo_daily GROUP BY 1, 2, 3
		) a FULL JOIN facts.inv_geo_country_all b USING (day, threat, country)
		WHERE coalesce(a.events, 0) <> coalesce(b.events, 0)`},
	{"keys left at zero", `SELECT (SELECT count(*) FROM facts.inv_threat_daily_all WHERE count = 0) +
			(SELECT count(*) FROM facts.inv_geo_daily_all WHERE events = 0) +
			(SELECT count(*) FROM facts.inv_geo_country_all WHERE events = 0)`},
}
