package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"threatview/visualrenderer"
	"threatview/visualrenderer/internal/rtest"
	"threatview/visualrenderer/postgres"
)

// mustStore returns a store on a fresh DB and a function that writes
// rollup rows and brings the summaries over all apps up to date.
func mustStore(t *testing.T) (*postgres.Store, func(string, ...any)) {
	t.Helper()
	url, pool := rtest.MustEventsDB(t)
	s, err := postgres.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s, func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(context.Background(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rtest.Summarize(t, pool)
	}
}

func TestStore_Stats(t *testing.T) {
	s, exec := mustStore(t)
	ctx := context.Background()
	h := time.Date(2026, 3, 10, 4, 0, 0, 0, time.UTC)
	exec(`INSERT INTO facts.events_by_country_per_hour (app_id, bucket, country, count) VALUES
		('a', $1, 'DE', 5), ('a', $1 + interval '1 hour', 'DE', 2), ('b', $1, 'DE', 1),
		('a', $1, 'FR', 3), ('b', $1 + interval '2 hour', 'US', 7), ('a', $1 + interval '3 hour', 'US', 100),
		('a', $1 - interval '1 hour', 'JP', 50)`, h)
	exec(`INSERT INTO facts.device_models_dim (id, manufacturer, model) VALUES (7, 'Apple', 'iPhone15,2'), (8, '', '')`)
	exec(`INSERT INTO facts.events_by_device_model_per_day (app_id, bucket, device_model_id, count) VALUES
		('a', '2026-03-10', 7, 4), ('b', '2026-03-10', 8, 1), ('b', '2026-03-11', 7, 2)`)
	exec(`INSERT INTO facts.events_by_threat_per_month (app_id, bucket, threat, count) VALUES
		('a', '2026-03-01', 'root', 4), ('a', '2026-05-01', 'root', 1), ('', '2026-03-01', 'hooking', 9)`)
	pt := func(t time.Time, n int64) visualrenderer.Point { return visualrenderer.Point{T: t, Count: n} }
	tests := []struct {
		name string
		q    visualrenderer.Query
		want visualrenderer.Stats
	}{
		{"AllAppsTop2", visualrenderer.Query{Dimension: visualrenderer.Country, Granularity: visualrenderer.Hour, From: h, To: h.Add(3 * time.Hour), Top: 2},
			visualrenderer.Stats{Total: 18, Series: []visualrenderer.Series{
				{Key: "DE", Total: 8, Points: []visualrenderer.Point{pt(h, 6), pt(h.Add(time.Hour), 2)}},
				{Key: "US", Total: 7, Points: []visualrenderer.Point{pt(h.Add(2*time.Hour), 7)}},
			}}},
		{"OneApp", visualrenderer.Query{Dimension: visualrenderer.Country, AppID: "a", Granularity: visualrenderer.Hour, From: h, To: h.Add(3 * time.Hour)},
			visualrenderer.Stats{Total: 10, Series: []visualrenderer.Series{
				{Key: "DE", Total: 7, Points: []visualrenderer.Point{pt(h, 5), pt(h.Add(time.Hour), 2)}},
				{Key: "FR", Total: 3, Points: []visualrenderer.Point{pt(h, 3)}},
			}}},
		{"Empty", visualrenderer.Query{Dimension: visualrenderer.Country, AppID: "nobody", Granularity: visualrenderer.Hour, From: h, To: h.Add(time.Hour)},
			visualrenderer.Stats{Series: []visualrenderer.Series{}}},
		{"DeviceModelNames", visualrenderer.Query{Dimension: visualrenderer.DeviceModel, Granularity: visualrenderer.Day, From: h.Truncate(24 * time.Hour), To: h.Truncate(24*time.Hour).AddDate(0, 0, 2)},
			visualrenderer.Stats{Total: 7, Series: []visualrenderer.Series{
				{Key: "Apple iPhone15,2", Total: 6, Points: []visualrenderer.Point{pt(time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), 4), pt(time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC), 2)}},
				{Key: "", Total: 1, Points: []visualrenderer.Point{pt(time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), 1)}},
			}}},
		{"ThreatsUnknownAppCountInAll", visualrenderer.Query{Dimension: visualrenderer.Threat, Granularity: visualrenderer.Month, From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
			visualrenderer.Stats{Total: 13, Series: []visualrenderer.Series{
				{Key: "hooking", Total: 9, Points: []visualrenderer.Point{pt(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 9)}},
				{Key: "root", Total: 4, Points: []visualrenderer.Point{pt(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 4)}},
			}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Stats(ctx, tc.q)
			if err != nil {
				t.Fatalf("Stats(%+v): %v", tc.q, err)
			}
			tc.want.Dimension, tc.want.Granularity, tc.want.From, tc.want.To = tc.q.Dimension, tc.q.Granularity, tc.q.From, tc.q.To
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Stats(%+v) =\n%+v\nwant\n%+v", tc.q, got, tc.want)
			}
		})
	}

	t.Run("Apps", func(t *testing.T) {
		exec(`INSERT INTO facts.events_by_country_per_month (app_id, bucket, country, count) VALUES
			('zeta', '2026-03-01', 'DE', 1), ('alpha', '2026-03-01', 'DE', 1), ('alpha', '2026-04-01', 'FR', 1), ('', '2026-01-01', 'DE', 4)`)
		got, err := s.Apps(ctx)
		if err != nil || !reflect.DeepEqual(got, []string{"alpha", "zeta"}) {
			t.Fatalf("Apps = %v, %v; want [alpha zeta]", got, err)
		}
	})

	t.Run("Ping", func(t *testing.T) {
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})
}

func TestStore_ErrUnavailable(t *testing.T) {
	url, _ := rtest.MustEventsDB(t)
	s, err := postgres.Open(context.Background(), url, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = s.Stats(context.Background(), visualrenderer.Query{Dimension: visualrenderer.OS, Granularity: visualrenderer.Day,
		From: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)})
	if !errors.Is(err, visualrenderer.ErrUnavailable) {
		t.Fatalf("Stats on a closed pool = %v, want ErrUnavailable", err)
	}
}

// TestStore_Stats_Totals checks the two-step answer (totals from whole
// coarser buckets plus the edges, then the top keys' points) against a
// plain sum over the asked granularity's own rollup, for ranges with
// ragged edges, per app and over all apps.
func TestStore_Stats_Totals(t *testing.T) {
	url, pool := rtest.MustEventsDB(t)
	end := time.Date(2026, 4, 20, 0, 0, 0, 0, time.UTC)
	rtest.Seed(t, pool, rtest.Synthetic{Apps: []string{"a", "b"}, From: end.AddDate(0, 0, -70), To: end, MaxPerHour: 2})
	s, err := postgres.Open(context.Background(), url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	for _, q := range []visualrenderer.Query{
		{Dimension: visualrenderer.Country, Granularity: visualrenderer.Hour, From: end.AddDate(0, 0, -20).Add(7 * time.Hour), To: end.AddDate(0, 0, -3).Add(-5 * time.Hour)},
		{Dimension: visualrenderer.Threat, AppID: "a", Granularity: visualrenderer.Hour, From: end.AddDate(0, 0, -9).Add(23 * time.Hour), To: end.AddDate(0, 0, -7).Add(time.Hour), Top: 2},
		{Dimension: visualrenderer.OS, AppID: "b", Granularity: visualrenderer.Day, From: end.AddDate(0, 0, -65), To: end.AddDate(0, 0, -2)},
		{Dimension: visualrenderer.DeviceModel, Granularity: visualrenderer.Day, From: end.AddDate(0, 0, -50), To: end, Top: 3},
		{Dimension: visualrenderer.Country, Granularity: visualrenderer.Month, From: end.AddDate(0, -3, 0), To: end.AddDate(0, 1, 0)},
	} {
		q.From, q.To = q.Granularity.Truncate(q.From), q.Granularity.Truncate(q.To)
		got, err := s.Stats(ctx, q)
		if err != nil {
			t.Fatalf("Stats(%+v): %v", q, err)
		}
		tbl, key := "facts.all_apps_events_by_"+string(q.Dimension)+"_per_"+string(q.Granularity), map[visualrenderer.Dimension]string{
			visualrenderer.Country: "country", visualrenderer.DeviceModel: "(SELECT trim(manufacturer || ' ' || model) FROM facts.device_models_dim d WHERE d.id = device_model_id)",
			visualrenderer.OS: "os", visualrenderer.Threat: "threat"}[q.Dimension]
		filter := ""
		if q.AppID != "" {
			tbl, filter = "facts.events_by_"+string(q.Dimension)+"_per_"+string(q.Granularity), "AND app_id = '"+q.AppID+"'"
		}
		want := map[string]int64{}
		points := map[string]int64{}
		rows, err := pool.Query(ctx, `SELECT `+key+`, bucket::timestamptz, count FROM `+tbl+` WHERE bucket >= $1 AND bucket < $2 `+filter, q.From, q.To)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for rows.Next() {
			var k string
			var b time.Time
			var n int64
			if err := rows.Scan(&k, &b, &n); err != nil {
				t.Fatal(err)
			}
			want[k] += n
			points[k+"@"+b.UTC().Format(time.RFC3339)] = n
			total += n
		}
		rows.Close()
		if got.Total != total || total == 0 {
			t.Errorf("Stats(%+v).Total = %d, want %d (nonzero)", q, got.Total, total)
		}
		if q.Top == 0 && len(got.Series) != len(want) {
			t.Errorf("Stats(%+v) has %d keys, want %d", q, len(got.Series), len(want))
		}
		for i, ser := range got.Series {
			if ser.Total != want[ser.Key] {
				t.Errorf("Stats(%+v) key %q total %d, want %d", q, ser.Key, ser.Total, want[ser.Key])
			}
			if i > 0 && (got.Series[i-1].Total < ser.Total) {
				t.Errorf("Stats(%+v): series not ordered by total", q)
			}
			var sum int64
			for _, p := range ser.Points {
				if points[ser.Key+"@"+p.T.Format(time.RFC3339)] != p.Count {
					t.Errorf("Stats(%+v) key %q point %s = %d, want %d", q, ser.Key, p.T, p.Count, points[ser.Key+"@"+p.T.Format(time.RFC3339)])
				}
				sum += p.Count
			}
			if sum != ser.Total {
				t.Errorf("Stats(%+v) key %q points sum to %d, total %d", q, ser.Key, sum, ser.Total)
			}
		}
	}
}

// TestStore_StatsPointCap: without top, an answer held every key × every
// bucket (thousands of device models × 744 hours). It must be refused with
// ErrTooLarge naming the top that fits, while top within the cap, totals
// only, and the summed series of a total chart still answer.
func TestStore_StatsPointCap(t *testing.T) {
	s, exec := mustStore(t)
	ctx := context.Background()
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// 200 countries (AA..HR), one count each in the first and the last hour.
	exec(`INSERT INTO facts.events_by_country_per_hour (app_id, bucket, country, count)
		SELECT 'a', b, chr(65 + i / 26) || chr(65 + i % 26), 1
		FROM generate_series(0, 199) AS i, unnest(ARRAY[$1::timestamp, $1::timestamp + interval '743 hours']) AS b`, from)
	exec(`INSERT INTO facts.events_by_country_per_day (app_id, bucket, country, count)
		SELECT 'a', b, chr(65 + i / 26) || chr(65 + i % 26), 1
		FROM generate_series(0, 199) AS i, unnest(ARRAY[$1::date, $1::date + 30]) AS b`, from)
	q := visualrenderer.Query{Dimension: visualrenderer.Country, Granularity: visualrenderer.Hour, From: from, To: from.Add(744 * time.Hour)}
	_, err := s.Stats(ctx, q)
	if !errors.Is(err, visualrenderer.ErrTooLarge) || !strings.Contains(err.Error(), "top=134") {
		t.Fatalf("Stats(200 keys × 744 hours) = %v, want ErrTooLarge naming top=134", err)
	}
	q.Top = 134
	if got, err := s.Stats(ctx, q); err != nil || len(got.Series) != 134 || got.Total != 400 {
		t.Fatalf("Stats(top 134) = %d series, total %d, %v; want 134, 400, nil", len(got.Series), got.Total, err)
	}
	q.Top = 0
	q.TotalsOnly = true
	if got, err := s.Stats(ctx, q); err != nil || len(got.Series) != 200 {
		t.Fatalf("Stats(totals only) = %d series, %v; want 200", len(got.Series), err)
	}
	q.TotalsOnly, q.Summed = false, true
	got, err := s.Stats(ctx, q)
	if err != nil || len(got.Series) != 1 || got.Series[0].Total != 400 || len(got.Series[0].Points) != 2 || got.Series[0].Points[1].Count != 200 {
		t.Fatalf("Stats(summed) = %+v, %v; want one series of two points of 200", got.Series, err)
	}
}
