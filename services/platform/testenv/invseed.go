package testenv

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs one SQL statement: a pgx pool or connection.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// InvBenchEvents is the investigation benchmarks' number of events:
// INV_BENCH_EVENTS when it is a number of at least 1,000, else def. Issue
// 40's bound is stated at 50,000,000 events in the month; the default sizes
// keep a run quick.
func InvBenchEvents(def int) int {
	if n, err := strconv.Atoi(os.Getenv("INV_BENCH_EVENTS")); err == nil && n >= 1000 {
		return n
	}
	return def
}

// SeedInvestigation generates n events server-side (INSERT ... SELECT over
// generate_series, in chunks, as COPY would load them) into events.events
// of a migrated events DB, with every index in place, then builds the
// investigation rollups from them with the processor's rules (the
// summaries over apps follow from their triggers) and analyzes. It returns
// the load time of the events alone.
//
// The spread follows issue 40's: 200 apps, devices = n / 50, sessions = n /
// 17, users = devices / 2, a third of the events threat events of 18 types,
// received over the 7 days up to end. A device belongs to one app (a device
// id is an app install's fingerprint: Android's and iOS's ids are per app
// or vendor), so a device's ~50 events are in its app, not spread over all
// 200. Ids are "dev-N", "ses-N", "app-N"; the user pseudonyms are "k1:" and
// an md5, not the collector's keyed hash.
func SeedInvestigation(tb testing.TB, db Execer, n int, end time.Time) time.Duration {
	tb.Helper()
	ctx := context.Background()
	span := 7 * 24 * time.Hour // the events' received_at spread: the last 7 days
	if _, err := db.Exec(ctx, `SELECT events.ensure_monthly_partitions('events.events', $1, 1)`, end.Add(-span)); err != nil {
		tb.Fatal(err)
	}
	devices, sessions := n/50+1, n/17+1
	start := time.Now()
	const chunk = 250_000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		_, err := db.Exec(ctx, `INSERT INTO events.events (id, received_at, occurred_at, type, app_id, app_version, device_id,
				device_model, manufacturer, os, os_version, country, session_id, user_pseudonym, language, os_major, os_minor,
				lat, lon, threat_types, payload)
			SELECT md5(i::text)::uuid, t, t, CASE WHEN i % 3 = 0 THEN 'threat.detected' ELSE 'app.startup' END,
				'app-' || (d % 200), '5.' || (i % 13), 'dev-' || d, 'Model ' || (d % 300), 'Maker ' || (d % 20),
				CASE WHEN d % 4 = 0 THEN 'ios' ELSE 'android' END, (12 + d % 6) || '.' || (d % 4) || '.1',
				chr((65 + d % 26)::int) || chr((65 + (d / 26) % 26)::int), 'ses-' || (i * 104729 % $4),
				CASE WHEN d % 2 = 0 THEN 'k1:' || md5('u' || (d / 2)) ELSE '' END, 'en-GB', 12 + d % 6, d % 4,
				(d % 1700) / 10.0 - 85, (d % 3600) / 10.0 - 180,
				CASE WHEN i % 3 = 0 THEN ARRAY[(ARRAY['AppIntegrity','PrivilegedAccess','Debug','Hooks','Passcode','Simulator',
					'SecureHardwareNotAvailable','SystemVPN','DeviceBinding','DeviceID','UnofficialStore','ObfuscationIssues',
					'DevMode','Malware','ADBEnabled','Screenshot','ScreenRecording','MultiInstance'])[1 + i % 18]] ELSE '{}' END,
				'{"attributes":{"k":"v"}}'
			FROM (SELECT i, (i * 2654435761) % $3 AS d, $5::timestamptz - (i % 604800) * interval '1 second' AS t
				FROM generate_series($1::bigint, $2::bigint - 1) i) g`, lo, hi, devices, sessions, end)
		if err != nil {
			tb.Fatalf("generate events %d..%d: %v", lo, hi, err)
		}
	}
	load := time.Since(start)
	for _, q := range []string{
		`INSERT INTO facts.inv_daily SELECT (occurred_at AT TIME ZONE 'UTC')::date, app_id, count(*), count(*) FILTER (WHERE threat_types <> '{}') FROM events.events GROUP BY 1, 2`,
		`INSERT INTO facts.inv_daily_users SELECT DISTINCT (occurred_at AT TIME ZONE 'UTC')::date, app_id, user_pseudonym FROM events.events WHERE user_pseudonym <> ''`,
		`INSERT INTO facts.inv_device_days SELECT DISTINCT (occurred_at AT TIME ZONE 'UTC')::date, app_id, t.threat, country,
			lat::text || ',' || lon::text, device_id FROM events.events, unnest('{""}'::text[] || threat_types) t(threat)`,
		`INSERT INTO facts.inv_geo_daily SELECT (occurred_at AT TIME ZONE 'UTC')::date, app_id, t.threat, country, lat::text || ',' || lon::text, count(*)
			FROM events.events, unnest('{""}'::text[] || threat_types) t(threat) GROUP BY 1, 2, 3, 4, 5`,
		`INSERT INTO facts.inv_threat_daily SELECT (occurred_at AT TIME ZONE 'UTC')::date, app_id, t.threat, d.dim, d.key, count(*)
			FROM events.events, unnest(threat_types) t(threat), LATERAL (VALUES ('os', os), ('os_version', os || ' ' || os_major || '.' || os_minor),
				('device_model', manufacturer || ' ' || device_model), ('country', country::text), ('app_version', app_version),
				('hour', to_char(occurred_at AT TIME ZONE 'UTC', 'HH24'))) d(dim, key) GROUP BY 1, 2, 3, 4, 5`,
		// Vacuumed and analysed here, so autovacuum does not catch up on
		// the freshly loaded tables while the reads are timed.
		`VACUUM (ANALYZE)`,
	} {
		// sql: q is one of the constant statements above.
		if _, err := db.Exec(ctx, q); err != nil {
			tb.Fatalf("%.60s: %v", q, err)
		}
	}
	return load
}
