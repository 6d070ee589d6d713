// Package mariadb stores and queries audit records in MariaDB's
// audit_events table, and holds the worker's single-active lock.
//
// Inserts are multi-row INSERT statements built as SQL text (one
// round trip each, no prepared statement), each kept under the server's
// max_allowed_packet, all of a batch in one transaction with the trail's
// tree update. The primary key (time, id) makes a record delivered twice
// land once: a batch that hits it is stored again without the records
// already there, so a duplicate never takes a sequence number.
package mariadb

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-sql-driver/mysql"

	"threatview/auditlogger"
	"threatview/auditlogger/trail"
	"threatview/platform/wire"
)

// Open opens the audit database with the options the store relies on:
// times parsed in UTC and parameters interpolated client-side (one round
// trip per query).
func Open(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse AUDIT_DATABASE_DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open audit database: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	db.SetConnMaxLifetime(30 * time.Minute)
	return db, nil
}

// maxStatement caps one INSERT statement even when max_allowed_packet is
// larger, to keep the worker's memory and the server's parse cost flat.
const maxStatement = 4 << 20

// Store is the MariaDB implementation of auditlogger.Store.
type Store struct {
	db         *sql.DB
	maxStmt    int
	statements atomic.Int64
}

var _ auditlogger.Store = (*Store)(nil)

// New returns a Store on db assuming a 1 MiB max_allowed_packet; call
// LoadMaxPacket to use the server's value.
func New(db *sql.DB) *Store {
	return &Store{db: db, maxStmt: (1 << 20) - 4096}
}

// LoadMaxPacket reads the server's max_allowed_packet and sizes statements
// under it; it returns the value read.
func (s *Store) LoadMaxPacket(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&n); err != nil {
		return 0, fmt.Errorf("read max_allowed_packet: %w: %w", auditlogger.ErrUnavailable, err)
	}
	s.SetMaxStatement(n - 4096)
	return n, nil
}

// SetMaxStatement sets the largest INSERT statement in bytes (at least
// 16 KiB, at most 4 MiB).
func (s *Store) SetMaxStatement(n int) {
	s.maxStmt = max(16<<10, min(n, maxStatement))
}

// Statements returns how many INSERT statements the store has executed.
func (s *Store) Statements() int64 { return s.statements.Load() }

// Ping checks the database (for /readyz).
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

const (
	insertHead = "INSERT INTO audit_events (id,time,actor_token_id,actor_app_id,action,resource,outcome,client_ip,user_agent,request_id,event_count,body_sha256,body,seq,leaf_hash) VALUES "
	insertRow  = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
	insertCols = 15
	// maxRowsPerStatement keeps a statement under MariaDB's 65,535
	// placeholders.
	maxRowsPerStatement = 65535 / insertCols
)

// statement is one multi-row INSERT and its arguments.
type statement struct {
	sql  string
	args []any
}

// Insert implements auditlogger.Store. Records must have passed
// auditlogger.Validate; a field that does not parse is stored as NULL. Each
// new record gets the next sequence number and its leaf in the trail's tree
// (see trail.go), in the same transaction.
func (s *Store) Insert(ctx context.Context, records []wire.AuditRecord) (int, error) {
	return s.insertChained(ctx, records)
}

// build groups records into multi-row INSERTs, each under s.maxStmt bytes
// (estimated from the values' sizes, as the driver sends them) and under the
// placeholder limit.
func (s *Store) build(rowsArgs [][]any) []statement {
	var stmts []statement
	var sqlText strings.Builder
	var args []any
	size, rows := 0, 0
	flush := func() {
		stmts = append(stmts, statement{sql: sqlText.String(), args: args})
		sqlText.Reset()
		args = nil
		size, rows = 0, 0
	}
	for _, row := range rowsArgs {
		rowSize := len(insertRow) + 1
		for _, a := range row {
			rowSize += argSize(a)
		}
		if rows > 0 && (len(insertHead)+size+rowSize > s.maxStmt || rows >= maxRowsPerStatement) {
			flush()
		}
		if rows == 0 {
			sqlText.WriteString(insertHead)
		} else {
			sqlText.WriteByte(',')
		}
		sqlText.WriteString(insertRow)
		args = append(args, row...)
		size += rowSize
		rows++
	}
	flush()
	return stmts
}

// rowArgs returns one record's column values in insertHead's order (without
// seq and leaf_hash) and the record's leaf fields, parsed once for both.
func rowArgs(r *wire.AuditRecord) ([]any, trail.LeafFields) {
	f := trail.LeafFields{Time: r.Time, Outcome: r.Outcome, EventCount: r.EventCount}
	f.ID, _ = auditlogger.ParseID(r.ID)
	var ip, sum, body any
	if a, err := netip.ParseAddr(r.ClientIP); err == nil {
		f.ClientIP = a.Unmap().AsSlice()
		ip = f.ClientIP
	}
	if b, err := hex.DecodeString(r.BodySHA256); err == nil && len(b) == 32 {
		f.BodySHA256 = b
		sum = b
	}
	if r.Body != nil {
		body = r.Body
	}
	f.ActorToken, f.ActorApp, f.Action, f.Resource = view(r.ActorToken), view(r.ActorApp), view(r.Action), view(r.Resource)
	f.UserAgent, f.RequestID = view(r.UserAgent), view(r.RequestID)
	return append(make([]any, 0, insertCols), f.ID[:], r.Time.UTC(), r.ActorToken, r.ActorApp, r.Action, r.Resource,
		r.Outcome, ip, r.UserAgent, r.RequestID, r.EventCount, sum, body), f
}

// view returns s's bytes without copying them. The leaf fields are only
// read (appended to the leaf's bytes) while the record is in hand, never
// written: a copy a field would be six allocations a row.
func view(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// argSize estimates the bytes one value takes on the wire, escaped.
func argSize(a any) int {
	switch v := a.(type) {
	case string:
		return 2*len(v) + 2
	case []byte:
		return 2*len(v) + 3
	default:
		return 32
	}
}

const (
	recordCols = "id,time,actor_token_id,actor_app_id,action,resource,outcome,client_ip,user_agent,request_id,event_count,body_sha256,body"
	selectCols = "SELECT " + recordCols + " FROM audit_events"
)

// Query implements auditlogger.Store: keyset pagination on (time, id).
func (s *Store) Query(ctx context.Context, f auditlogger.Filter) (auditlogger.Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = auditlogger.DefaultLimit
	}
	if limit > auditlogger.MaxLimit {
		return auditlogger.Page{}, &auditlogger.FieldError{Index: -1, Field: "limit", Reason: fmt.Sprintf("above %d", auditlogger.MaxLimit)}
	}
	var q strings.Builder
	q.WriteString(selectCols)
	args := make([]any, 0, 8)
	sep := " WHERE "
	where := func(cond string, a ...any) {
		q.WriteString(sep)
		sep = " AND "
		q.WriteString(cond)
		args = append(args, a...)
	}
	if !f.From.IsZero() {
		where("time >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		where("time < ?", f.To.UTC())
	}
	if f.Actor != "" {
		where("actor_token_id = ?", f.Actor)
	}
	if f.Action != "" {
		where("action = ?", f.Action)
	}
	if f.AppID != "" {
		where("actor_app_id = ?", f.AppID)
	}
	if f.After != nil {
		t := f.After.Time.UTC()
		where("(time > ? OR (time = ? AND id > ?))", t, t, f.After.ID[:])
	}
	q.WriteString(" ORDER BY time, id LIMIT ")
	q.WriteString(strconv.Itoa(limit + 1))
	// sql: constant fragments joined; every filter value is a ? argument.
	rows, err := s.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return auditlogger.Page{}, fmt.Errorf("query audit events: %w: %w", auditlogger.ErrUnavailable, err)
	}
	defer rows.Close()
	page := auditlogger.Page{Records: make([]wire.AuditRecord, 0, min(limit, 64))}
	var last auditlogger.Cursor
	for rows.Next() {
		if len(page.Records) == limit {
			c := last
			page.Next = &c
			break
		}
		var r wire.AuditRecord
		id, err := scanRecord(rows, &r)
		if err != nil {
			return auditlogger.Page{}, err
		}
		last.ID, last.Time = id, r.Time
		page.Records = append(page.Records, r)
	}
	if err := rows.Err(); err != nil {
		return auditlogger.Page{}, fmt.Errorf("query audit events: %w: %w", auditlogger.ErrUnavailable, err)
	}
	return page, nil
}

// scanner is *sql.Rows or *sql.Row.
type scanner interface{ Scan(dest ...any) error }

// scanRecord scans selectCols (and then extra) into r and returns its id.
func scanRecord(rows scanner, r *wire.AuditRecord, extra ...any) ([16]byte, error) {
	var (
		id       [16]byte
		rawID    []byte
		ip, sum  []byte
		body     []byte
		outcome  int
		evtCount int64
	)
	dest := append([]any{&rawID, &r.Time, &r.ActorToken, &r.ActorApp, &r.Action, &r.Resource, &outcome,
		&ip, &r.UserAgent, &r.RequestID, &evtCount, &sum, &body}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return id, fmt.Errorf("scan audit event: %w", err)
	}
	if len(rawID) != 16 {
		return id, fmt.Errorf("scan audit event: id of %d bytes", len(rawID))
	}
	copy(id[:], rawID)
	r.Time = r.Time.UTC()
	r.ID = auditlogger.FormatID(id)
	r.Outcome = outcome
	r.EventCount = int(evtCount)
	if a, ok := netip.AddrFromSlice(ip); ok {
		r.ClientIP = a.String()
	}
	if len(sum) > 0 {
		r.BodySHA256 = hex.EncodeToString(sum)
	}
	if body != nil {
		r.Body = body
	}
	return id, nil
}

// IsPermission reports whether err is MariaDB refusing a command for lack of
// privileges (the worker's user has INSERT and SELECT only).
func IsPermission(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1142, 1143, 1044, 1045, 1227: // table/column access denied, db access denied, super needed
		return true
	}
	return false
}
