// Package postgres reads the rollups of the events DB for the visual
// renderer. Every connection is read-only (default_transaction_read_only),
// whatever role the URL names; the deployment also gives it a role that can
// only SELECT the facts schema.
package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/visualrenderer"
)

// Store reads the rollups. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var _ visualrenderer.Store = (*Store)(nil)

// connectTimeout bounds a connection attempt when the URL sets none.
const connectTimeout = 5 * time.Second

// Open connects a pool of at most maxConns connections to the events DB at
// url (RENDERER_DATABASE_URL) and checks nothing else: /readyz pings.
func Open(ctx context.Context, url string, maxConns int32) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse RENDERER_DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["default_transaction_read_only"] = "on"
	rp["TimeZone"] = "UTC"
	// A stats query reads at most a few hundred thousand index entries; a
	// runaway one is cut off rather than holding a connection.
	rp["statement_timeout"] = "10s"
	rp["application_name"] = "visualrenderer"
	// The reads are short index scans: compiling one with JIT (when a plan's
	// estimate passes jit_above_cost, as the distinct counts' per-subject
	// look-up makes it) cost about 100 ms, more than the query.
	rp["jit"] = "off"
	// A plan made for the values at hand: the queries' "$n = '' OR app_id =
	// $n" and "$5 AND ..." fold away, leaving the keys an index can be
	// entered by. pgx prepares every statement, and a generic plan (chosen
	// after five runs) keeps the OR and reads across every app's rows.
	rp["plan_cache_mode"] = "force_custom_plan"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open events DB: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks the database answers and the rollups are readable (for /readyz).
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.pool.QueryRow(ctx, "SELECT 1 FROM facts.events_by_threat_per_month LIMIT 1").Scan(&one); err != nil && err != pgx.ErrNoRows {
		return fmt.Errorf("ping events DB: %w: %w", visualrenderer.ErrUnavailable, err)
	}
	return nil
}

// keyColumn is each dimension's key column in its rollups.
var keyColumn = map[visualrenderer.Dimension]string{
	visualrenderer.Country:     "country",
	visualrenderer.DeviceModel: "device_model_id::text",
	visualrenderer.OS:          "os",
	visualrenderer.Threat:      "threat",
}

// coarser is the granularity whose buckets are whole buckets of g, used to
// total the middle of a range in fewer rows.
var coarser = map[visualrenderer.Granularity]visualrenderer.Granularity{
	visualrenderer.Hour: visualrenderer.Day,
	visualrenderer.Day:  visualrenderer.Month,
}

// table returns the rollup of q's dimension at granularity g: per app when
// q names one, else the summary over all apps.
func table(q visualrenderer.Query, g visualrenderer.Granularity) string {
	t := fmt.Sprintf("facts.events_by_%s_per_%s", q.Dimension, g)
	if q.AppID == "" {
		t = fmt.Sprintf("facts.all_apps_events_by_%s_per_%s", q.Dimension, g)
	}
	return t
}

// Stats answers q in two steps. First the total of every key: the whole
// buckets of the next coarser granularity inside the range (days of an
// hourly range, months of a daily one) come from that rollup, only the
// edges from q's own, so a month of hours over all apps reads about 30
// rows per key instead of 744; the rollups at each granularity count the
// same facts, so the sums are equal. Then the points of the top keys from
// q's rollup. For device_model the key is the model's name from
// facts.device_models_dim ("manufacturer model"; "" when the event named
// none).
func (s *Store) Stats(ctx context.Context, q visualrenderer.Query) (visualrenderer.Stats, error) {
	out := visualrenderer.Stats{Dimension: q.Dimension, Granularity: q.Granularity, From: q.From, To: q.To, Series: []visualrenderer.Series{}}
	col, ok := keyColumn[q.Dimension]
	if !ok {
		return out, fmt.Errorf("stats: %w: dimension %q", visualrenderer.ErrInvalid, q.Dimension)
	}
	totals, err := s.totals(ctx, q, col)
	if err != nil {
		return out, err
	}
	for _, t := range totals {
		out.Total += t.Total
	}
	if q.Top > 0 && len(totals) > q.Top {
		totals = totals[:q.Top]
	}
	if err := q.CheckPoints(len(totals)); err != nil {
		return out, fmt.Errorf("stats: %w", err)
	}
	if q.Summed && !q.TotalsOnly {
		return s.summed(ctx, q, out)
	}
	if len(totals) == 0 || q.TotalsOnly {
		out.Series = totals
		if q.Dimension == visualrenderer.DeviceModel && len(totals) > 0 {
			if err := s.nameModels(ctx, out.Series); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	keys := make([]string, len(totals))
	index := make(map[string]int, len(totals))
	for i, t := range totals {
		keys[i], index[t.Key] = t.Key, i
	}
	// The keys in their column's type, so the (key, bucket) index serves.
	var keyArg any = keys
	if q.Dimension == visualrenderer.DeviceModel {
		ids := make([]int32, len(keys))
		for i, k := range keys {
			n, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return out, fmt.Errorf("stats: device model id %q: %w", k, err)
			}
			ids[i] = int32(n)
		}
		keyArg = ids
	}
	// The array in the column's type: compared as text, char(2) country
	// codes would not use the index.
	cond := map[visualrenderer.Dimension]string{
		visualrenderer.Country:     "country = ANY($3::bpchar[])",
		visualrenderer.DeviceModel: "device_model_id = ANY($3::int[])",
		visualrenderer.OS:          "os = ANY($3::text[])",
		visualrenderer.Threat:      "threat = ANY($3::text[])",
	}[q.Dimension]
	args := []any{q.From, q.To, keyArg}
	filter := ""
	if q.AppID != "" {
		filter, args = "AND app_id = $4", append(args, q.AppID)
	}
	// A summary over all apps has a row per shard (migration events
	// 000024): a key's rows are summed, and a sum of 0 (an erasure's
	// decrement in one shard's row, the counts in another's) is no point.
	// sql: table, columns and filter come from the fixed maps above, never from input.
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT %[2]s, bucket::timestamptz, sum(count)::bigint FROM %[1]s
		WHERE bucket >= $1 AND bucket < $2 AND %[4]s %[3]s GROUP BY 1, 2 HAVING sum(count) <> 0 ORDER BY 1, 2`, table(q, q.Granularity), col, filter, cond), args...)
	if err != nil {
		return out, fmt.Errorf("stats %s: %w: %w", table(q, q.Granularity), visualrenderer.ErrUnavailable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var t time.Time
		var n int64
		if err := rows.Scan(&k, &t, &n); err != nil {
			return out, fmt.Errorf("stats points: %w: %w", visualrenderer.ErrUnavailable, err)
		}
		i := index[k]
		totals[i].Points = append(totals[i].Points, visualrenderer.Point{T: t.UTC(), Count: n})
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("stats points: %w: %w", visualrenderer.ErrUnavailable, err)
	}
	out.Series = totals
	if q.Dimension == visualrenderer.DeviceModel {
		if err := s.nameModels(ctx, out.Series); err != nil {
			return out, err
		}
	}
	return out, nil
}

// summed completes out with one series, every key's counts added per bucket.
func (s *Store) summed(ctx context.Context, q visualrenderer.Query, out visualrenderer.Stats) (visualrenderer.Stats, error) {
	args := []any{q.From, q.To}
	filter := ""
	if q.AppID != "" {
		filter, args = "AND app_id = $3", append(args, q.AppID)
	}
	// sql: table and filter come from the fixed maps above, never from input.
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT bucket::timestamptz, sum(count)::bigint FROM %s
		WHERE bucket >= $1 AND bucket < $2 %s GROUP BY 1 HAVING sum(count) <> 0 ORDER BY 1`, table(q, q.Granularity), filter), args...)
	if err != nil {
		return out, fmt.Errorf("stats sum %s: %w: %w", table(q, q.Granularity), visualrenderer.ErrUnavailable, err)
	}
	points, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (visualrenderer.Point, error) {
		var p visualrenderer.Point
		err := r.Scan(&p.T, &p.Count)
		p.T = p.T.UTC()
		return p, err
	})
	if err != nil {
		return out, fmt.Errorf("stats sum %s: %w: %w", table(q, q.Granularity), visualrenderer.ErrUnavailable, err)
	}
	out.Series = []visualrenderer.Series{{Key: "All " + q.Dimension.Unit(), Total: out.Total, Points: points}}
	return out, nil
}

// totals returns every key's total in q's range, largest first, ties by key.
func (s *Store) totals(ctx context.Context, q visualrenderer.Query, col string) ([]visualrenderer.Series, error) {
	fine := table(q, q.Granularity)
	// [midFrom, midTo) is the part made of whole coarser buckets.
	midFrom, midTo := q.To, q.To
	var coarse string
	if c, ok := coarser[q.Granularity]; ok {
		if a, b := c.RoundUp(q.From), c.Truncate(q.To); a.Before(b) {
			midFrom, midTo, coarse = a, b, table(q, c)
		}
	}
	args := []any{q.From, midFrom, midTo, q.To}
	filter := ""
	if q.AppID != "" {
		filter, args = "AND app_id = $5", append(args, q.AppID)
	}
	// sql: tables, column and filter come from the fixed maps above, never from input.
	sql := fmt.Sprintf(`SELECT %[2]s, count FROM %[1]s WHERE ((bucket >= $1 AND bucket < $2) OR (bucket >= $3 AND bucket < $4)) %[3]s`, fine, col, filter)
	if coarse != "" {
		sql += fmt.Sprintf(` UNION ALL SELECT %[2]s, count FROM %[1]s WHERE bucket >= $2 AND bucket < $3 %[3]s`, coarse, col, filter)
	}
	sql = `SELECT k, sum(n)::bigint FROM (` + sql + `) AS x(k, n) GROUP BY 1 HAVING sum(n) <> 0 ORDER BY 2 DESC, 1`
	// sql: built above from the fixed table and column maps; input only in args.
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("stats totals %s: %w: %w", fine, visualrenderer.ErrUnavailable, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (visualrenderer.Series, error) {
		var s visualrenderer.Series
		err := r.Scan(&s.Key, &s.Total)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("stats totals %s: %w: %w", fine, visualrenderer.ErrUnavailable, err)
	}
	return out, nil
}

// nameModels replaces device model ids by their names.
func (s *Store) nameModels(ctx context.Context, series []visualrenderer.Series) error {
	ids := make([]string, len(series))
	for i := range series {
		ids[i] = series[i].Key
	}
	rows, err := s.pool.Query(ctx, `SELECT id::text, manufacturer, model FROM facts.device_models_dim WHERE id = ANY($1::int[])`, ids)
	if err != nil {
		return fmt.Errorf("device model names: %w: %w", visualrenderer.ErrUnavailable, err)
	}
	names := map[string]string{}
	for rows.Next() {
		var id, manufacturer, model string
		if err := rows.Scan(&id, &manufacturer, &model); err != nil {
			rows.Close()
			return fmt.Errorf("device model names: %w: %w", visualrenderer.ErrUnavailable, err)
		}
		names[id] = strings.TrimSpace(manufacturer + " " + model)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("device model names: %w: %w", visualrenderer.ErrUnavailable, err)
	}
	for i := range series {
		if n, ok := names[series[i].Key]; ok {
			series[i].Key = n
		}
	}
	return nil
}

// Apps lists the apps of the monthly country rollup, which holds every
// counted event once. A loose index scan (one probe per app) keeps it
// cheap however many rows each app has.
func (s *Store) Apps(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
WITH RECURSIVE a AS (
	(SELECT app_id FROM facts.events_by_country_per_month ORDER BY app_id LIMIT 1)
	UNION ALL
	SELECT (SELECT app_id FROM facts.events_by_country_per_month WHERE app_id > a.app_id ORDER BY app_id LIMIT 1)
	FROM a WHERE a.app_id IS NOT NULL
)
SELECT app_id FROM a WHERE app_id IS NOT NULL AND app_id <> '' LIMIT 10000`)
	if err != nil {
		return nil, fmt.Errorf("apps: %w: %w", visualrenderer.ErrUnavailable, err)
	}
	apps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("apps: %w: %w", visualrenderer.ErrUnavailable, err)
	}
	return apps, nil
}
