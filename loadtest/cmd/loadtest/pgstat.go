package main

import (
	"context"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Statement is one normalized statement's cost during the plan, from
// pg_stat_statements.
type Statement struct {
	Query   string  `json:"query"`
	Calls   int64   `json:"calls"`
	TotalMs float64 `json:"total_ms"`
	MeanMs  float64 `json:"mean_ms"`
}

type stmtKey struct {
	id    int64
	query string
}

type stmtRow struct {
	calls   int64
	totalMs float64
}

// pgStatements reads pg_stat_statements for the current database. It returns
// nil when the extension is missing or unreadable: the page then goes
// without it.
func pgStatements(ctx context.Context, getenv func(string) string) map[stmtKey]stmtRow {
	url := getenv("EVENTS_DATABASE_URL")
	if url == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
		SELECT coalesce(queryid, 0), coalesce(query, ''), calls, total_exec_time
		  FROM pg_stat_statements
		 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[stmtKey]stmtRow{}
	for rows.Next() {
		var k stmtKey
		var r stmtRow
		if err := rows.Scan(&k.id, &k.query, &r.calls, &r.totalMs); err != nil {
			return nil
		}
		out[k] = r
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}

// topStatements returns the n statements that took the most time between
// two readings.
func topStatements(before, after map[stmtKey]stmtRow, n int) []Statement {
	if after == nil {
		return nil
	}
	var out []Statement
	for k, a := range after {
		b := before[k]
		calls, total := a.calls-b.calls, a.totalMs-b.totalMs
		if calls <= 0 || total <= 0 {
			continue
		}
		q := strings.Join(strings.Fields(k.query), " ")
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		out = append(out, Statement{Query: q, Calls: calls, TotalMs: total, MeanMs: total / float64(calls)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TotalMs > out[j].TotalMs })
	if len(out) > n {
		out = out[:n]
	}
	return out
}
