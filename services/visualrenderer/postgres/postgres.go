// Package postgres reads the rollups of the events DB for the visual
// renderer. Every connection is read-only (default_transaction_read_only),
// whatever role the URL names; the deployment also gives it a role that can
// only SELECT the facts schema.
package postgres

import (
	"context"
	"fmt"
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

// statsSQL sums the rollup per key and bucket in [$1, $2), keeps the $3
// keys with the largest totals (all when NULL), and returns the grand total
// over every key on each row. %[1]s is the table, %[2]s the key column and
// %[3]s the app filter: "AND app_id = $4" on a per-app rollup, "" on an
// all-apps summary (a separate statement, so neither plan is a generic one
// that fits both). All come from the fixed maps above.
const statsSQL = `
WITH b AS (
	SELECT %[2]s AS k, bucket::timestamptz AS t, sum(count)::bigint AS n
	FROM facts.%[1]s
	WHERE bucket >= $1 AND bucket < $2 %[3]s
	GROUP BY 1, 2
), tot AS (
	SELECT k, sum(n)::bigint AS total FROM b GROUP BY 1
), top AS (
	SELECT k, total FROM tot ORDER BY total DESC, k LIMIT $3
)
SELECT (SELECT sum(total) FROM tot)::bigint, top.k, top.total, b.t, b.n
FROM top JOIN b USING (k)
ORDER BY top.total DESC, top.k, b.t`

// Stats answers q from the rollup of its dimension and granularity. For
// device_model the key is the model's name from facts.device_models_dim
// ("manufacturer model"; "" when the event named none).
func (s *Store) Stats(ctx context.Context, q visualrenderer.Query) (visualrenderer.Stats, error) {
	out := visualrenderer.Stats{Dimension: q.Dimension, Granularity: q.Granularity, From: q.From, To: q.To, Series: []visualrenderer.Series{}}
	table := fmt.Sprintf("events_by_%s_per_%s", q.Dimension, q.Granularity)
	col, ok := keyColumn[q.Dimension]
	if !ok {
		return out, fmt.Errorf("stats: %w: dimension %q", visualrenderer.ErrInvalid, q.Dimension)
	}
	var top any
	if q.Top > 0 {
		top = q.Top
	}
	args := []any{q.From, q.To, top}
	filter := ""
	if q.AppID != "" {
		filter = "AND app_id = $4"
		args = append(args, q.AppID)
	} else {
		// Over all apps: the summary, one row per bucket and key.
		table = "all_apps_" + table
	}
	// sql: table, column and filter come from the fixed maps above, never from input.
	rows, err := s.pool.Query(ctx, fmt.Sprintf(statsSQL, table, col, filter), args...)
	if err != nil {
		return out, fmt.Errorf("stats %s: %w: %w", table, visualrenderer.ErrUnavailable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var total, n int64
		var t time.Time
		if err := rows.Scan(&out.Total, &k, &total, &t, &n); err != nil {
			return out, fmt.Errorf("stats %s: %w: %w", table, visualrenderer.ErrUnavailable, err)
		}
		if len(out.Series) == 0 || out.Series[len(out.Series)-1].Key != k {
			out.Series = append(out.Series, visualrenderer.Series{Key: k, Total: total})
		}
		last := &out.Series[len(out.Series)-1]
		last.Points = append(last.Points, visualrenderer.Point{T: t.UTC(), Count: n})
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("stats %s: %w: %w", table, visualrenderer.ErrUnavailable, err)
	}
	if q.Dimension == visualrenderer.DeviceModel && len(out.Series) > 0 {
		if err := s.nameModels(ctx, out.Series); err != nil {
			return out, err
		}
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
