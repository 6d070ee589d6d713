// Package pgtest holds the processor's integration-test helpers: a migrated
// events DB per test, random events, and the check that every rollup equals
// a count over events.events.
package pgtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations

	"threatview/migrations"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// MustEventsDB creates a fresh events DB, migrates it and returns its URL
// and a pool on it (closed at cleanup).
func MustEventsDB(tb testing.TB) (string, *pgxpool.Pool) {
	tb.Helper()
	url := testenv.MustPostgres(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open("pgx", url)
	if err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db, migrations.Events); err != nil {
		tb.Fatalf("migrate events DB: %v", err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		tb.Fatalf("pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	// Runs before the database is dropped: DROP DATABASE ... WITH (FORCE)
	// may not terminate an autovacuum worker (it belongs to the superuser),
	// which tests that write many rows wake up.
	tb.Cleanup(func() { waitAutovacuum(tb, pool) })
	return url, pool
}

func waitAutovacuum(tb testing.TB, pool *pgxpool.Pool) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'autovacuum worker'`).Scan(&n)
		if err != nil || n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Logf("autovacuum still running on the test database after 30s")
}

// Count returns the result of a count query.
func Count(tb testing.TB, pool *pgxpool.Pool, query string, args ...any) int {
	tb.Helper()
	var n int
	// sql: test helper; the query text is written by the tests themselves.
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// UUID returns a random version-4 UUID in canonical form.
func UUID(r *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var (
	countries = []string{"DE", "FR", "US", "BR", "JP", "IN", "GB"}
	models    = [][2]string{{"Apple", "iPhone15,2"}, {"Samsung", "SM-S918B"}, {"Google", "Pixel 8"}, {"Xiaomi", "23049PCD8G"}, {"", ""}, {"Apple", "MacBookPro18,1"}}
	oses      = []string{"iOS", "Android", "macOS", "Windows", ""}
	// threats covers the forms a threat may take: a string, an object with
	// a type, repeats within one event (one sighting), elements without a
	// type (not counted), and a type longer than the 128 characters kept.
	threats = []string{
		`[{"type":"root","severity":"high"}]`,
		`["root","hooking"]`,
		`["hooking","hooking",{"type":"debugger"}]`,
		`[{"severity":"low"},42,"emulator",{"type":7},""]`,
		`["` + strings.Repeat("x", 200) + `"]`,
		`[]`,
	}
)

// Event returns a random valid event received at receivedAt that occurred up
// to spread before it (late events land in past buckets).
func Event(r *rand.Rand, receivedAt time.Time, spread time.Duration) wire.Event {
	m := models[r.IntN(len(models))]
	occurred := receivedAt.Add(-time.Duration(r.Int64N(int64(spread) + 1))).Truncate(time.Microsecond)
	e := wire.Event{
		ID:         UUID(r),
		Type:       "app.startup",
		ReceivedAt: receivedAt,
		OccurredAt: occurred,
		App:        wire.App{ID: fmt.Sprintf("app-%d", r.IntN(3)), Version: "1.2.3"},
		Device:     wire.Device{ID: UUID(r), Manufacturer: m[0], Model: m[1], OS: oses[r.IntN(len(oses))], OSVersion: "17.1"},
		Country:    countries[r.IntN(len(countries))],
		ClientIP:   fmt.Sprintf("203.0.113.%d", r.IntN(256)),
		RequestID:  UUID(r),
		Threats:    json.RawMessage(threats[r.IntN(len(threats))]),
	}
	if r.IntN(4) == 0 {
		e.Attributes = json.RawMessage(`{"k":"v","n":1}`)
	}
	return e
}

// Body encodes events as one message body.
func Body(tb testing.TB, events ...wire.Event) []byte {
	tb.Helper()
	b, err := json.Marshal(wire.EventBatch{V: wire.Version, Events: events})
	if err != nil {
		tb.Fatalf("marshal: %v", err)
	}
	return b
}

// threatTruth lists, for an event e, each distinct threat type it reports:
// written with jsonpath, independently of facts.threat_types, so the check
// does not restate the code it checks.
const threatTruth = `CROSS JOIN LATERAL (
	SELECT DISTINCT substr(v #>> '{}', 1, 128) AS k FROM (
		SELECT jsonb_path_query(coalesce(e.payload, '{}'), 'lax $.threats[*] ? (@.type() == "string")') AS v
		UNION ALL
		SELECT jsonb_path_query(coalesce(e.payload, '{}'), 'lax $.threats[*] ? (@.type() == "object").type ? (@.type() == "string")')
	) s WHERE v #>> '{}' <> '') th`

// rollups names each rollup with its key column and, as text, the bucket of
// an event: written independently of the aggregator's date_trunc so the
// check does not restate the code it checks.
var rollups = func() []struct{ table, key, keyExpr, join, format, app, truthApp string } {
	var out []struct{ table, key, keyExpr, join, format, app, truthApp string }
	for _, d := range []struct{ name, key, keyExpr, join string }{
		{"country", "country", "e.country", ""},
		{"device_model", "device_model_id", "d.id", ""},
		{"os", "os", "e.os", ""},
		{"threat", "threat", "th.k", threatTruth},
	} {
		for _, g := range []struct{ name, format string }{
			{"hour", "YYYY-MM-DD HH24"}, {"day", "YYYY-MM-DD"}, {"month", "YYYY-MM"},
		} {
			// Each rollup per app, and its summary over all apps.
			out = append(out, struct{ table, key, keyExpr, join, format, app, truthApp string }{
				"facts.events_by_" + d.name + "_per_" + g.name, d.key, d.keyExpr, d.join, g.format, "app_id", "e.app_id"},
				struct{ table, key, keyExpr, join, format, app, truthApp string }{
					"facts.all_apps_events_by_" + d.name + "_per_" + g.name, d.key, d.keyExpr, d.join, g.format, "''", "''"})
		}
	}
	return out
}()

// AssertRollupsExact fails unless every row of every rollup (a key's rows
// summed: the facts.all_apps_* summaries have one per shard) equals the
// count(*) over events.events for its app, bucket and key (over all apps
// for the facts.all_apps_* summaries), with no bucket
// missing or extra, and every rollup but the threat ones sums to wantTotal
// (the threat rollups sum to the threat sightings of the stored events).
func AssertRollupsExact(tb testing.TB, pool *pgxpool.Pool, wantTotal int) {
	tb.Helper()
	ctx := context.Background()
	for _, r := range rollups {
		// Hour buckets are timestamptz, day and month buckets dates; both
		// render in UTC through the session time zone set here.
		q := fmt.Sprintf(`
WITH want AS (
	SELECT %[6]s AS a, to_char(e.occurred_at AT TIME ZONE 'UTC', '%[4]s') AS b, (%[3]s)::text AS k, count(*) AS n
	FROM events.events e LEFT JOIN facts.device_models_dim d
	  ON d.manufacturer = e.manufacturer AND d.model = e.device_model
	%[5]s
	GROUP BY 1, 2, 3
), got AS (
	SELECT %[7]s AS a, to_char(bucket::timestamp, '%[4]s') AS b, %[2]s::text AS k, sum(count) AS n FROM %[1]s
	GROUP BY 1, 2, 3 HAVING sum(count) <> 0
)
SELECT count(*) FILTER (WHERE want.n IS DISTINCT FROM got.n),
       coalesce(sum(got.n), 0), count(got.n), coalesce(sum(want.n), 0)
FROM want FULL JOIN got ON want.a = got.a AND want.b = got.b AND want.k = got.k`, r.table, r.key, r.keyExpr, r.format, r.join, r.truthApp, r.app)
		tx, err := pool.Begin(ctx)
		if err != nil {
			tb.Fatalf("begin: %v", err)
		}
		var bad, sum, rows, wantSum int
		_, err = tx.Exec(ctx, "SET LOCAL TimeZone = 'UTC'")
		if err == nil {
			// sql: test helper; the query text is written by the tests themselves.
			err = tx.QueryRow(ctx, q).Scan(&bad, &sum, &rows, &wantSum)
		}
		_ = tx.Rollback(ctx)
		if err != nil {
			tb.Fatalf("compare %s: %v", r.table, err)
		}
		if bad != 0 {
			tb.Errorf("%s: %d buckets differ from count(*) over events.events", r.table, bad)
		}
		if r.key == "threat" {
			wantTotal := wantSum
			if wantTotal == 0 && rows == 0 {
				tb.Errorf("%s: no threat sightings in the test data", r.table)
			}
			if sum != wantTotal {
				tb.Errorf("%s sums to %d, want %d", r.table, sum, wantTotal)
			}
			continue
		}
		if sum != wantTotal {
			tb.Errorf("%s sums to %d, want %d", r.table, sum, wantTotal)
		}
		if rows == 0 && wantTotal > 0 {
			tb.Errorf("%s is empty", r.table)
		}
	}
}

// UUIDv7 returns a time-ordered version-7 UUID for t (RFC 9562): the
// millisecond timestamp first, then random bits, as the collector and the
// SDKs make them.
func UUIDv7(r *rand.Rand, t time.Time) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	for i := 6; i < 16; i++ {
		b[i] = byte(r.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// BackendCPU is the CPU time used so far by database db's backends and
// the server's WAL writer, checkpointer and background writer
// (testenv.PostgresCPU with writers).
func BackendCPU(db string) (time.Duration, bool) { return testenv.PostgresCPU(db, true) }
