// Package rtest holds the visual renderer's integration-test helpers: a
// fresh, migrated events DB per test, and synthetic events folded into the
// rollups the way the aggregator folds them.
package rtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations

	"threatview/migrations"
	"threatview/platform/testenv"
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
	return url, pool
}

// Synthetic describes a deterministic set of events: for every app and
// every hour of [From, To), 0 to MaxPerHour events, each with a country,
// device model, OS and 0 to 2 threat types picked by hashing.
type Synthetic struct {
	Apps       []string
	From, To   time.Time
	MaxPerHour int
}

// Countries, Models, OSes and Threats are what Seed picks from.
var (
	Countries = []string{"DE", "FR", "US", "BR", "JP", "IN", "GB", "NG", "ES", "KR"}
	Models    = [][2]string{{"Apple", "iPhone15,2"}, {"Samsung", "SM-S918B"}, {"Google", "Pixel 8"}, {"Xiaomi", "23049PCD8G"}, {"Apple", "iPad13,1"}, {"", ""}}
	OSes      = []string{"iOS", "Android", "iPadOS", ""}
	Threats   = []string{"root", "hooking", "emulator", "debugger", "tampered_app"}
)

// Seed makes the events of s (one row each, in a temporary table) and adds
// them to all twelve rollups and their summaries over all apps, grouped exactly as the aggregator
// groups facts; it returns how many events it made.
func Seed(tb testing.TB, pool *pgxpool.Pool, s Synthetic) int {
	tb.Helper()
	ctx := context.Background()
	// One connection: the temporary table lives in its session.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatalf("seed: %v", err)
	}
	defer conn.Release()
	stmts := []string{
		`CREATE TEMP TABLE IF NOT EXISTS syn (occurred_at timestamptz, app_id text, country char(2), device_model_id int, os text, threats text[])`,
		`TRUNCATE syn`,
		`INSERT INTO facts.device_models_dim (manufacturer, model)
		 SELECT m[1], m[2] FROM unnest($1::text[]) WITH ORDINALITY AS u(x, i), LATERAL (SELECT string_to_array(x, '|') AS m) mm
		 ON CONFLICT DO NOTHING`,
		`INSERT INTO syn
		 SELECT h + make_interval(secs => (abs(hashtext(a || h::text || i || 't')) % 3600)),
		        a,
		        ($3::text[])[1 + abs(hashtext(a || h::text || i || 'c')) % cardinality($3::text[])],
		        (SELECT d.id FROM facts.device_models_dim d WHERE d.manufacturer || '|' || d.model =
		           ($1::text[])[1 + abs(hashtext(a || h::text || i || 'm')) % cardinality($1::text[])]),
		        ($4::text[])[1 + abs(hashtext(a || h::text || i || 'o')) % cardinality($4::text[])],
		        ARRAY(SELECT DISTINCT ($5::text[])[1 + abs(hashtext(a || h::text || i || 'x' || j)) % cardinality($5::text[])]
		              FROM generate_series(1, abs(hashtext(a || h::text || i || 'n')) % 3) j)
		 FROM unnest($2::text[]) a,
		      generate_series($6::timestamptz, $7::timestamptz - interval '1 hour', interval '1 hour') h,
		      LATERAL generate_series(1, abs(hashtext(a || h::text)) % ($8::int + 1)) i`,
	}
	models := make([]string, len(Models))
	for i, m := range Models {
		models[i] = m[0] + "|" + m[1]
	}
	args := [][]any{nil, nil, {models},
		{models, s.Apps, Countries, OSes, Threats, s.From, s.To, s.MaxPerHour}}
	for i, q := range stmts {
		// sql: the fixed statements above; every value is an argument.
		if _, err := conn.Exec(ctx, q, args[i]...); err != nil {
			tb.Fatalf("seed: %s: %v", q, err)
		}
	}
	grains := map[string]string{
		"hour":  "date_trunc('hour', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
		"day":   "(occurred_at AT TIME ZONE 'UTC')::date",
		"month": "date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date",
	}
	keys := map[string][2]string{
		"country":      {"country", "country"},
		"device_model": {"device_model_id", "device_model_id"},
		"os":           {"os", "os"},
		"threat":       {"threat", "x.threat"},
	}
	for g, b := range grains {
		for k, c := range keys {
			from := "syn"
			if k == "threat" {
				from = "syn s, unnest(s.threats) AS x(threat)"
			}
			q := fmt.Sprintf(`INSERT INTO facts.events_by_%s_per_%s AS t (app_id, bucket, %s, count)
				SELECT app_id, %s, %s, count(*) FROM %s GROUP BY 1, 2, 3
				ON CONFLICT (app_id, bucket, %s) DO UPDATE SET count = t.count + excluded.count`, k, g, c[0], b, c[1], from, c[0])
			// sql: test fixture; names from the fixed maps above.
			if _, err := conn.Exec(ctx, q); err != nil {
				tb.Fatalf("seed %s per %s: %v", k, g, err)
			}
			q = fmt.Sprintf(`INSERT INTO facts.all_apps_events_by_%s_per_%s AS t (bucket, %s, count)
				SELECT %s, %s, count(*) FROM %s GROUP BY 1, 2
				ON CONFLICT (bucket, %s, shard) DO UPDATE SET count = t.count + excluded.count`, k, g, c[0], b, c[1], from, c[0])
			// sql: test fixture; names from the fixed maps above.
			if _, err := conn.Exec(ctx, q); err != nil {
				tb.Fatalf("seed %s per %s over all apps: %v", k, g, err)
			}
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM syn").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DROP TABLE syn"); err != nil {
		tb.Fatal(err)
	}
	return n
}

// Summarize rebuilds every facts.all_apps_* summary from its rollup, for
// tests that write rollup rows directly.
func Summarize(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	for _, k := range [][2]string{{"country", "country"}, {"device_model", "device_model_id"}, {"os", "os"}, {"threat", "threat"}} {
		for _, g := range []string{"hour", "day", "month"} {
			t := "events_by_" + k[0] + "_per_" + g
			// sql: test fixture; names from the fixed lists above.
			q := fmt.Sprintf(`TRUNCATE facts.all_apps_%[1]s; INSERT INTO facts.all_apps_%[1]s (bucket, %[2]s, count) SELECT bucket, %[2]s, sum(count) FROM facts.%[1]s GROUP BY 1, 2`, t, k[1])
			if _, err := pool.Exec(context.Background(), q); err != nil {
				tb.Fatalf("summarize %s: %v", t, err)
			}
		}
	}
}

// MustIdentity returns the identity service's base URL and the admin key
// of the local stack (THREATVIEW_IDENTITY_URL, THREATVIEW_ADMIN_KEY);
// outside make test it skips when they are unset.
func MustIdentity(tb testing.TB) (string, string) {
	tb.Helper()
	u, key := os.Getenv("THREATVIEW_IDENTITY_URL"), os.Getenv("THREATVIEW_ADMIN_KEY")
	if u == "" || key == "" {
		if testenv.Required() {
			tb.Fatal("THREATVIEW_IDENTITY_URL and THREATVIEW_ADMIN_KEY must be set (make up)")
		}
		tb.Skip("THREATVIEW_IDENTITY_URL not set")
	}
	return strings.TrimRight(u, "/"), key
}

// MustPerson creates a person with roles at identity (through its admin
// API) and deletes them at cleanup; it returns the username and password.
func MustPerson(tb testing.TB, identityURL, adminKey string, roles ...string) (string, string) {
	tb.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	user := "rtest-" + hex.EncodeToString(b)
	pw := "pw-" + hex.EncodeToString(b) + "-long-enough"
	if roles == nil {
		roles = []string{}
	}
	body, _ := json.Marshal(map[string]any{"username": user, "password": pw, "roles": roles})
	if code := identityCall(tb, http.MethodPost, identityURL+"/v1/users", adminKey, body); code != http.StatusCreated {
		tb.Fatalf("create person %s at identity: status %d", user, code)
	}
	tb.Cleanup(func() { identityCall(tb, http.MethodDelete, identityURL+"/v1/users/"+user, adminKey, nil) })
	return user, pw
}

// DisablePerson disables user at identity, as an administrator would.
func DisablePerson(tb testing.TB, identityURL, adminKey, user string) {
	tb.Helper()
	if code := identityCall(tb, http.MethodPatch, identityURL+"/v1/users/"+user, adminKey, []byte(`{"disabled":true}`)); code != http.StatusOK {
		tb.Fatalf("disable %s at identity: status %d", user, code)
	}
}

func identityCall(tb testing.TB, method, url, adminKey string, body []byte) int {
	tb.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
