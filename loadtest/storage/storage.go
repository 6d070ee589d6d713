// Package storage measures how many bytes each stored event costs in every
// table of the events and audit databases, and projects that to a day, a
// month and three months at a given request rate, beside the reference
// deployment's figures.
package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Table is the size of one table (all its partitions, indexes and TOAST).
type Table struct {
	DB    string `json:"db"`
	Name  string `json:"name"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Snapshot is the size of every measured table and the number of stored
// events and audit rows at one moment.
type Snapshot struct {
	Events      int64   `json:"events"`
	AuditRows   int64   `json:"audit_rows"`
	Tables      []Table `json:"tables"`
	AuditFailed string  `json:"audit_failed,omitempty"`
}

// PostgresTables are the tables of the events DB that grow with traffic.
var PostgresTables = []string{
	"events.events",
	"facts.facts",
	"facts.device_models_dim",
	"facts.events_by_country_per_hour",
	"facts.events_by_country_per_day",
	"facts.events_by_country_per_month",
	"facts.events_by_device_model_per_hour",
	"facts.events_by_device_model_per_day",
	"facts.events_by_device_model_per_month",
	"facts.events_by_os_per_hour",
	"facts.events_by_os_per_day",
	"facts.events_by_os_per_month",
}

// MeasurePostgres sizes PostgresTables: pg_total_relation_size summed over the
// table and all its partitions. Tables that do not exist are skipped.
func MeasurePostgres(ctx context.Context, conn *pgx.Conn) ([]Table, int64, error) {
	var out []Table
	var events int64
	for _, name := range PostgresTables {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return nil, 0, fmt.Errorf("look up %s: %w", name, err)
		}
		if !exists {
			continue
		}
		t := Table{DB: "postgres", Name: name}
		err := conn.QueryRow(ctx, `
			SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::bigint
			  FROM pg_partition_tree($1::regclass)`, name).Scan(&t.Bytes)
		if err != nil {
			return nil, 0, fmt.Errorf("size of %s: %w", name, err)
		}
		// sql: name comes from the fixed list above, never from input.
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+name).Scan(&t.Rows); err != nil {
			return nil, 0, fmt.Errorf("count %s: %w", name, err)
		}
		if name == "events.events" {
			events = t.Rows
		}
		out = append(out, t)
	}
	return out, events, nil
}

// MeasureMariaDB sizes every table of the audit database from
// information_schema (data_length + index_length, summed over partitions),
// after ANALYZE so InnoDB's statistics are current.
func MeasureMariaDB(ctx context.Context, db *sql.DB) ([]Table, int64, error) {
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&schema); err != nil {
		return nil, 0, fmt.Errorf("current database: %w", err)
	}
	rows, err := db.QueryContext(ctx, `
		SELECT table_name FROM information_schema.tables
		 WHERE table_schema = ? AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'goose%'
		 ORDER BY table_name`, schema)
	if err != nil {
		return nil, 0, fmt.Errorf("list audit tables: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, 0, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var out []Table
	var auditRows int64
	for _, n := range names {
		q := "`" + strings.ReplaceAll(n, "`", "``") + "`"
		// ANALYZE needs more than SELECT on some setups; sizes are then only
		// as fresh as InnoDB's own background statistics.
		// sql: a table name from information_schema, backquoted; no input.
		if r, err := db.QueryContext(ctx, "ANALYZE TABLE "+q); err == nil {
			r.Close()
		}
		t := Table{DB: "mariadb", Name: schema + "." + n}
		err := db.QueryRowContext(ctx, `
			SELECT coalesce(sum(data_length + index_length), 0)
			  FROM information_schema.partitions
			 WHERE table_schema = ? AND table_name = ?`, schema, n).Scan(&t.Bytes)
		if err != nil {
			return nil, 0, fmt.Errorf("size of %s: %w", n, err)
		}
		// sql: a table name from information_schema, backquoted; no input.
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+q).Scan(&t.Rows); err != nil {
			return nil, 0, fmt.Errorf("count %s: %w", n, err)
		}
		if n == "audit_events" {
			auditRows = t.Rows
		}
		out = append(out, t)
	}
	return out, auditRows, nil
}

// Save writes s as JSON to path.
func (s Snapshot) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads a snapshot written by Save.
func Load(path string) (Snapshot, error) {
	var s Snapshot
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("decode %s: %w", path, err)
	}
	return s, nil
}

// Row is one line of the storage table: a table's cost per event and its
// projection at Rate requests per second.
type Row struct {
	Table         Table
	AddedRows     int64
	AddedBytes    int64
	BytesPerEvent float64
	PerDay        float64 // bytes
	PerMonth      float64 // bytes, 30 days
	Per3Months    float64 // bytes, 90 days
	Reference     string  // the reference deployment's figure per day, if any
}

// Projection of every table at a rate.
type Projection struct {
	Rate          float64 // events per second
	EventsAdded   int64
	AuditAdded    int64
	Rows          []Row
	PostgresTotal Row
	MariaDBTotal  Row
}

// SecondsPerDay is the length of the projected day.
const SecondsPerDay = 86400

// Project computes bytes per event for every table between base and cur (base
// may be the zero Snapshot: sizes are then totals over everything stored) and
// projects them at rate events per second. A Postgres table costs its growth
// divided by the events stored meanwhile. A MariaDB table costs its average
// row size (all its rows) times the rows it gained per audit row (one audit
// row per request: at one event per request that is per event).
func Project(base, cur Snapshot, rate float64) Projection {
	p := Projection{Rate: rate, EventsAdded: cur.Events - base.Events, AuditAdded: cur.AuditRows - base.AuditRows}
	prev := map[string]Table{}
	for _, t := range base.Tables {
		prev[t.DB+"/"+t.Name] = t
	}
	p.PostgresTotal.Table = Table{DB: "postgres", Name: "Postgres total"}
	p.MariaDBTotal.Table = Table{DB: "mariadb", Name: "MariaDB total"}
	for _, t := range cur.Tables {
		b := prev[t.DB+"/"+t.Name]
		r := Row{Table: t, AddedRows: t.Rows - b.Rows, AddedBytes: t.Bytes - b.Bytes, Reference: ReferencePerDay(t.Name)}
		tot := &p.PostgresTotal
		if t.DB == "mariadb" {
			tot = &p.MariaDBTotal
			// InnoDB grows a table in 1 MiB extents and samples its
			// statistics, so the growth over a short run is mostly
			// rounding: cost a row at the table's average instead.
			if t.Rows > 0 && p.AuditAdded > 0 {
				r.BytesPerEvent = float64(t.Bytes) / float64(t.Rows) * float64(r.AddedRows) / float64(p.AuditAdded)
			}
		} else {
			r.BytesPerEvent = perEvent(r.AddedBytes, p.EventsAdded)
		}
		r.fill(rate)
		p.Rows = append(p.Rows, r)
		tot.AddedBytes += r.AddedBytes
		tot.AddedRows += r.AddedRows
		tot.Table.Bytes += t.Bytes
		tot.Table.Rows += t.Rows
	}
	p.PostgresTotal.BytesPerEvent = perEvent(p.PostgresTotal.AddedBytes, p.EventsAdded)
	p.PostgresTotal.fill(rate)
	p.PostgresTotal.Reference = "~23 GB"
	for _, r := range p.Rows {
		if r.Table.DB == "mariadb" {
			p.MariaDBTotal.BytesPerEvent += r.BytesPerEvent
		}
	}
	p.MariaDBTotal.fill(rate)
	p.MariaDBTotal.Reference = "~17 GB"
	return p
}

func perEvent(bytes, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(bytes) / float64(n)
}

func (r *Row) fill(rate float64) {
	r.PerDay = r.BytesPerEvent * rate * SecondsPerDay
	r.PerMonth = r.PerDay * 30
	r.Per3Months = r.PerDay * 90
}

// ReferencePerDay is the reference deployment's storage per day at 105 req/s
// for a table, or "" when it gave none.
func ReferencePerDay(name string) string {
	switch {
	case name == "events.events":
		return "~8 GB"
	case name == "facts.facts":
		return "~3 GB"
	case strings.HasPrefix(name, "facts.events_by_"):
		return "< 1 MB"
	case strings.HasSuffix(name, "audit_events"):
		return "~17 GB"
	}
	return ""
}

// HumanBytes formats n bytes with decimal units (kB, MB, GB), as the
// reference's figures are written.
func HumanBytes(n float64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	units := []string{"B", "kB", "MB", "GB", "TB"}
	i := 0
	for n >= 1000 && i < len(units)-1 {
		n /= 1000
		i++
	}
	s := fmt.Sprintf("%.1f %s", n, units[i])
	if i == 0 {
		s = fmt.Sprintf("%.0f B", n)
	}
	if neg {
		s = "-" + s
	}
	return s
}

// WriteMarkdown writes the storage table.
func (p Projection) WriteMarkdown(w *strings.Builder) {
	fmt.Fprintf(w, "| table | rows added | bytes added | bytes/event | per day @ %.0f req/s | per month | per 3 months | reference per day |\n", p.Rate)
	w.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range append(append([]Row{}, p.Rows...), p.PostgresTotal, p.MariaDBTotal) {
		name := r.Table.Name
		if strings.HasSuffix(name, "total") {
			name = "**" + name + "**"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %s | %s | %s |\n", name, r.AddedRows,
			HumanBytes(float64(r.AddedBytes)), r.BytesPerEvent, HumanBytes(r.PerDay),
			HumanBytes(r.PerMonth), HumanBytes(r.Per3Months), r.Reference)
	}
}

// CSV returns the storage table as CSV records (bytes, no units).
func (p Projection) CSV() [][]string {
	out := [][]string{{"db", "table", "rows_added", "bytes_added", "bytes_per_event", "bytes_per_day", "bytes_per_month", "bytes_per_3_months", "reference_per_day"}}
	for _, r := range append(append([]Row{}, p.Rows...), p.PostgresTotal, p.MariaDBTotal) {
		out = append(out, []string{r.Table.DB, r.Table.Name, fmt.Sprint(r.AddedRows), fmt.Sprint(r.AddedBytes),
			fmt.Sprintf("%.1f", r.BytesPerEvent), fmt.Sprintf("%.0f", r.PerDay), fmt.Sprintf("%.0f", r.PerMonth),
			fmt.Sprintf("%.0f", r.Per3Months), r.Reference})
	}
	return out
}
