// Package mariadb stores tokens in the MariaDB tokens database (table
// tokens, see migrations/tokens) with database/sql and go-sql-driver/mysql.
package mariadb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"threatview/tokens"
)

// Open opens a connection pool for dsn (a go-sql-driver DSN), forcing the
// options the store relies on: parseTime and UTC.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse TOKENS_DATABASE_DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("tokens database connector: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	db.SetConnMaxLifetime(5 * time.Minute)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// Store implements tokens.Store on a MariaDB database.
type Store struct {
	db *sql.DB
}

var _ tokens.Store = (*Store)(nil)

// New returns a Store on db (see Open).
func New(db *sql.DB) *Store { return &Store{db: db} }

const columns = "id, app_id, name, token_hash, created_at, revoked_at, last_used_at"

// Create inserts t in a transaction and commits it once confirm succeeds.
func (s *Store) Create(ctx context.Context, t tokens.Token, confirm func(context.Context) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	_, err = tx.ExecContext(ctx,
		"INSERT INTO tokens (id, app_id, name, token_hash, created_at) VALUES (?, ?, ?, ?, ?)",
		t.ID, t.AppID, t.Name, t.Hash[:], t.CreatedAt)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			return fmt.Errorf("insert token %s: %w", t.ID, tokens.ErrConflict)
		}
		return fmt.Errorf("insert token %s: %w", t.ID, err)
	}
	if confirm != nil {
		if err := confirm(ctx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit token %s: %w", t.ID, err)
	}
	return nil
}

// Get returns the token with id or tokens.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (tokens.Token, error) {
	t, err := scan(s.db.QueryRowContext(ctx, "SELECT "+columns+" FROM tokens WHERE id = ?", id))
	if err != nil {
		return tokens.Token{}, fmt.Errorf("get token %s: %w", id, err)
	}
	return t, nil
}

// List returns the tokens matching f, newest first.
func (s *Store) List(ctx context.Context, f tokens.Filter) ([]tokens.Token, error) {
	var (
		q    strings.Builder
		args []any
	)
	q.WriteString("SELECT " + columns + " FROM tokens")
	if f.AppID != "" {
		q.WriteString(" WHERE app_id = ?")
		args = append(args, f.AppID)
	}
	q.WriteString(" ORDER BY created_at DESC, id")
	if f.Limit > 0 {
		q.WriteString(" LIMIT ?")
		args = append(args, f.Limit)
	}
	// sql: constant fragments joined; every filter value is a ? argument.
	return s.query(ctx, "list tokens", q.String(), args...)
}

// Active returns at most limit active tokens, most recently used or
// created first.
func (s *Store) Active(ctx context.Context, limit int) ([]tokens.Token, error) {
	return s.query(ctx, "list active tokens", "SELECT "+columns+" FROM tokens WHERE revoked_at IS NULL"+
		" ORDER BY GREATEST(created_at, COALESCE(last_used_at, created_at)) DESC, id LIMIT ?", limit)
}

// query returns the tokens a SELECT of columns finds.
func (s *Store) query(ctx context.Context, what, q string, args ...any) ([]tokens.Token, error) {
	// sql: q is built by List and Active from constant fragments only; every
	// value is a ? argument.
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := []tokens.Token{}
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Revoke sets revoked_at unless already set and returns the stored token.
func (s *Store) Revoke(ctx context.Context, id string, at time.Time) (tokens.Token, error) {
	if _, err := s.db.ExecContext(ctx,
		"UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", at, id); err != nil {
		return tokens.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return s.Get(ctx, id)
}

// ByHash returns the token whose hash is h or tokens.ErrNotFound.
func (s *Store) ByHash(ctx context.Context, h [sha256.Size]byte) (tokens.Token, error) {
	t, err := scan(s.db.QueryRowContext(ctx, "SELECT "+columns+" FROM tokens WHERE token_hash = ?", h[:]))
	if err != nil {
		return tokens.Token{}, fmt.Errorf("token by hash: %w", err)
	}
	return t, nil
}

// TouchLastUsed raises last_used_at for each id; it never lowers it, so
// replicas writing out of order do no harm.
func (s *Store) TouchLastUsed(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	stmt, err := tx.PrepareContext(ctx,
		"UPDATE tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)")
	if err != nil {
		return fmt.Errorf("prepare last used update: %w", err)
	}
	defer stmt.Close()
	for id, at := range used {
		if _, err := stmt.ExecContext(ctx, at, id, at); err != nil {
			return fmt.Errorf("update last used of token %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit last used of %d tokens: %w", len(used), err)
	}
	return nil
}

// Ping checks the database connection.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

type scanner interface{ Scan(dest ...any) error }

func scan(row scanner) (tokens.Token, error) {
	var (
		t       tokens.Token
		hash    []byte
		revoked sql.NullTime
		used    sql.NullTime
	)
	if err := row.Scan(&t.ID, &t.AppID, &t.Name, &hash, &t.CreatedAt, &revoked, &used); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return tokens.Token{}, tokens.ErrNotFound
		}
		return tokens.Token{}, err
	}
	if len(hash) != sha256.Size {
		return tokens.Token{}, fmt.Errorf("token %s: stored hash has %d bytes", t.ID, len(hash))
	}
	copy(t.Hash[:], hash)
	t.CreatedAt = t.CreatedAt.UTC()
	if revoked.Valid {
		r := revoked.Time.UTC()
		t.RevokedAt = &r
	}
	if used.Valid {
		u := used.Time.UTC()
		t.LastUsedAt = &u
	}
	return t, nil
}
