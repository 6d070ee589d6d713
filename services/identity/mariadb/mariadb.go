// Package mariadb stores people, refresh tokens, sign-in failures and
// pending OIDC sign-ins in the MariaDB identity database (see
// migrations/identity) with database/sql and go-sql-driver/mysql.
package mariadb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"threatview/identity"
	"threatview/platform/authz"
)

// Open opens a connection pool for dsn (a go-sql-driver DSN), forcing the
// options the store relies on: parseTime and UTC.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse IDENTITY_DATABASE_DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("identity database connector: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	db.SetConnMaxLifetime(5 * time.Minute)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// Store implements identity.Store on a MariaDB database.
type Store struct {
	db *sql.DB
}

var _ identity.Store = (*Store)(nil)

// New returns a Store on db (see Open).
func New(db *sql.DB) *Store { return &Store{db: db} }

// Ping checks the connection.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// inTx runs f in a transaction, then confirm, then commits.
func (s *Store) inTx(ctx context.Context, f func(tx *sql.Tx) error, confirm identity.Confirm) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := f(tx); err != nil {
		return err
	}
	if confirm != nil {
		if err := confirm(ctx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

const userCols = "username, password_hash, roles, source, disabled, created_at, updated_at, last_login_at"

// selectCols are userCols and the profile, which scanUser reads.
const selectCols = userCols + ", display_name, email, phone"

type scanner interface{ Scan(...any) error }

func scanUser(row scanner) (identity.User, error) {
	var u identity.User
	var roles string
	var last sql.NullTime
	if err := row.Scan(&u.Username, &u.PasswordHash, &roles, &u.Source, &u.Disabled, &u.CreatedAt, &u.UpdatedAt, &last,
		&u.DisplayName, &u.Email, &u.Phone); err != nil {
		return identity.User{}, err
	}
	u.Roles = splitRoles(roles)
	if last.Valid {
		t := last.Time.UTC()
		u.LastLoginAt = &t
	}
	u.CreatedAt, u.UpdatedAt = u.CreatedAt.UTC(), u.UpdatedAt.UTC()
	return u, nil
}

func splitRoles(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// CreateUser inserts u and commits once confirm succeeds.
func (s *Store) CreateUser(ctx context.Context, u identity.User, confirm identity.Confirm) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO users ("+selectCols+") VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
			u.Username, u.PasswordHash, strings.Join(u.Roles, ","), u.Source, u.Disabled, u.CreatedAt, u.UpdatedAt,
			u.DisplayName, u.Email, u.Phone)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			return fmt.Errorf("insert user: %w", identity.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		return nil
	}, confirm)
}

// GetUser returns the person with username.
func (s *Store) GetUser(ctx context.Context, username string) (identity.User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, "SELECT "+selectCols+" FROM users WHERE username = ?", username))
	if errors.Is(err, sql.ErrNoRows) {
		return identity.User{}, identity.ErrNotFound
	}
	if err != nil {
		return identity.User{}, fmt.Errorf("select user: %w", err)
	}
	return u, nil
}

// ListUsers returns every person by username.
func (s *Store) ListUsers(ctx context.Context) ([]identity.User, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+selectCols+" FROM users ORDER BY username")
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []identity.User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// UpdateUser applies ch; locking revokes the person's refresh tokens. A
// change that leaves no active owner is rolled back with
// identity.ErrLastOwner.
func (s *Store) UpdateUser(ctx context.Context, username string, ch identity.UserChange, at time.Time, confirm identity.Confirm) (identity.User, error) {
	var u identity.User
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		u, err = scanUser(tx.QueryRowContext(ctx, "SELECT "+selectCols+" FROM users WHERE username = ? FOR UPDATE", username))
		if errors.Is(err, sql.ErrNoRows) {
			return identity.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("select user: %w", err)
		}
		wasOwner := u.ActiveOwner()
		if ch.Roles != nil {
			u.Roles = *ch.Roles
		}
		if ch.Disabled != nil {
			u.Disabled = *ch.Disabled
		}
		for _, f := range []struct{ to, from *string }{{&u.DisplayName, ch.DisplayName}, {&u.Email, ch.Email}, {&u.Phone, ch.Phone}} {
			if f.from != nil {
				*f.to = *f.from
			}
		}
		u.UpdatedAt = at
		if _, err := tx.ExecContext(ctx, "UPDATE users SET roles = ?, disabled = ?, display_name = ?, email = ?, phone = ?, updated_at = ? WHERE username = ?",
			strings.Join(u.Roles, ","), u.Disabled, u.DisplayName, u.Email, u.Phone, at, username); err != nil {
			return fmt.Errorf("update user: %w", err)
		}
		if wasOwner && !u.ActiveOwner() {
			if err := ownerLeft(ctx, tx); err != nil {
				return err
			}
		}
		if u.Disabled {
			if _, err := tx.ExecContext(ctx, "UPDATE refresh_tokens SET revoked_at = ? WHERE username = ? AND revoked_at IS NULL", at, username); err != nil {
				return fmt.Errorf("revoke refresh tokens: %w", err)
			}
		}
		return nil
	}, confirm)
	return u, err
}

// ownerLeft returns identity.ErrLastOwner when no active owner is left in
// tx. The read locks every owner's row, so two owners demoting each other
// at once cannot both succeed (one waits, or deadlocks and is rolled back).
func ownerLeft(ctx context.Context, tx *sql.Tx) error {
	n, err := otherOwners(ctx, tx, "")
	if err != nil {
		return err
	}
	if n == 0 {
		return identity.ErrLastOwner
	}
	return nil
}

// otherOwners counts the active owners in tx other than username, locking
// their rows (see ownerLeft).
func otherOwners(ctx context.Context, tx *sql.Tx, username string) (int, error) {
	var n int
	err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM users WHERE disabled = FALSE AND FIND_IN_SET(?, roles) > 0 AND username <> ? FOR UPDATE",
		authz.RoleAdmin, username).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count owners: %w", err)
	}
	return n, nil
}

// SetPassword replaces the hash and revokes the person's refresh tokens.
func (s *Store) SetPassword(ctx context.Context, username, hash string, at time.Time, confirm identity.Confirm) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE users SET password_hash = ?, updated_at = ? WHERE username = ?", hash, at, username)
		if err != nil {
			return fmt.Errorf("update password: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return identity.ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, "UPDATE refresh_tokens SET revoked_at = ? WHERE username = ? AND revoked_at IS NULL", at, username); err != nil {
			return fmt.Errorf("revoke refresh tokens: %w", err)
		}
		return nil
	}, confirm)
}

// DeleteUser removes the person (their refresh tokens go by cascade); the
// last active owner stays (identity.ErrLastOwner).
func (s *Store) DeleteUser(ctx context.Context, username string, confirm identity.Confirm) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		u, err := scanUser(tx.QueryRowContext(ctx, "SELECT "+selectCols+" FROM users WHERE username = ? FOR UPDATE", username))
		if errors.Is(err, sql.ErrNoRows) {
			return identity.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("select user: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM users WHERE username = ?", username); err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		if u.ActiveOwner() {
			return ownerLeft(ctx, tx)
		}
		return nil
	}, confirm)
}

// UpsertOIDCUser finds the OIDC person with key (issuer and subject) and
// sets their roles, or creates them under username. See identity.Store.
func (s *Store) UpsertOIDCUser(ctx context.Context, key [sha256.Size]byte, username string, roles []string, at time.Time) (identity.User, error) {
	var u identity.User
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		u, err = scanUser(tx.QueryRowContext(ctx, "SELECT "+selectCols+" FROM users WHERE oidc_key = ? FOR UPDATE", key[:]))
		if errors.Is(err, sql.ErrNoRows) {
			var bound []byte
			u, err = scanUser(tx.QueryRowContext(ctx, "SELECT "+selectCols+" FROM users WHERE username = ? FOR UPDATE", username))
			if err == nil {
				err = tx.QueryRowContext(ctx, "SELECT oidc_key FROM users WHERE username = ?", username).Scan(&bound)
			}
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if len(roles) == 0 {
					return identity.ErrNotFound
				}
				u = identity.User{Username: username, Roles: roles, Source: identity.SourceOIDC, CreatedAt: at, UpdatedAt: at}
				_, err = tx.ExecContext(ctx, "INSERT INTO users ("+userCols+", oidc_key) VALUES (?, '', ?, ?, FALSE, ?, ?, NULL, ?)",
					username, strings.Join(roles, ","), identity.SourceOIDC, at, at, key[:])
				if err != nil {
					return fmt.Errorf("insert oidc user: %w", err)
				}
				return nil
			case err != nil:
				return fmt.Errorf("select user: %w", err)
			case u.Source != identity.SourceOIDC:
				return fmt.Errorf("%w: %s is a local account", identity.ErrForbidden, username)
			case bound != nil:
				return fmt.Errorf("%w: %s belongs to another person of the identity provider", identity.ErrForbidden, username)
			}
			// Stored before people were keyed by subject: bound now.
			if _, err := tx.ExecContext(ctx, "UPDATE users SET oidc_key = ? WHERE username = ?", key[:], username); err != nil {
				return fmt.Errorf("bind oidc user: %w", err)
			}
		} else if err != nil {
			return fmt.Errorf("select oidc user: %w", err)
		}
		if u.ActiveOwner() && !slices.Contains(roles, authz.RoleAdmin) {
			// The provider's groups would demote the last active owner:
			// they keep the role, as they would against the Users API.
			n, err := otherOwners(ctx, tx, u.Username)
			if err != nil {
				return err
			}
			if n == 0 {
				roles = append(slices.Clone(roles), authz.RoleAdmin)
				slices.Sort(roles)
			}
		}
		u.Roles, u.UpdatedAt = roles, at
		if _, err := tx.ExecContext(ctx, "UPDATE users SET roles = ?, updated_at = ? WHERE username = ?", strings.Join(roles, ","), at, u.Username); err != nil {
			return fmt.Errorf("update oidc user: %w", err)
		}
		if len(roles) == 0 {
			if _, err := tx.ExecContext(ctx, "UPDATE refresh_tokens SET revoked_at = ? WHERE username = ? AND revoked_at IS NULL", at, u.Username); err != nil {
				return fmt.Errorf("revoke sessions of %s: %w", u.Username, err)
			}
		}
		return nil
	}, nil)
	return u, err
}

// TouchLogin sets last_login_at.
func (s *Store) TouchLogin(ctx context.Context, username string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE users SET last_login_at = ? WHERE username = ?", at, username); err != nil {
		return fmt.Errorf("touch last login: %w", err)
	}
	return nil
}

// CreateRefresh stores a refresh token and drops some long-expired ones.
func (s *Store) CreateRefresh(ctx context.Context, t identity.RefreshToken) error {
	// Expired tokens are useless; they go in small batches, a day late.
	if _, err := s.db.ExecContext(ctx, "DELETE FROM refresh_tokens WHERE expires_at < ? LIMIT 100", t.CreatedAt.Add(-24*time.Hour)); err != nil {
		return fmt.Errorf("drop expired refresh tokens: %w", err)
	}
	_, err := s.db.ExecContext(ctx, "INSERT INTO refresh_tokens (token_hash, family_id, username, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
		t.Hash[:], t.FamilyID, t.Username, t.CreatedAt, t.ExpiresAt)
	if err != nil {
		return fmt.Errorf("insert refresh token: %w", err)
	}
	return nil
}

// RotateRefresh uses up the token old and stores next in its family.
func (s *Store) RotateRefresh(ctx context.Context, old [sha256.Size]byte, next identity.RefreshToken, at time.Time, grace time.Duration) (identity.RefreshToken, time.Time, error) {
	var t identity.RefreshToken
	var capped time.Time
	reused := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var used, revoked sql.NullTime
		var hash []byte
		err := tx.QueryRowContext(ctx, "SELECT token_hash, family_id, username, created_at, expires_at, used_at, revoked_at FROM refresh_tokens WHERE token_hash = ? FOR UPDATE", old[:]).
			Scan(&hash, &t.FamilyID, &t.Username, &t.CreatedAt, &t.ExpiresAt, &used, &revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return identity.ErrBadCredentials
		}
		if err != nil {
			return fmt.Errorf("select refresh token: %w", err)
		}
		copy(t.Hash[:], hash)
		switch {
		case revoked.Valid || !t.ExpiresAt.After(at):
			return identity.ErrBadCredentials
		case used.Valid && (grace <= 0 || at.Sub(used.Time) > grace):
			reused = true
			if _, err := tx.ExecContext(ctx, "UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL", at, t.FamilyID); err != nil {
				return fmt.Errorf("revoke reused family: %w", err)
			}
			return nil
		}
		// An OIDC person's sign-in does not slide: every token of the family
		// ends when its first one does, so a person removed at the provider
		// must come back through it within that time.
		var source string
		if err := tx.QueryRowContext(ctx, "SELECT source FROM users WHERE username = ?", t.Username).Scan(&source); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("select user source: %w", err)
		}
		if source == identity.SourceOIDC && next.ExpiresAt.After(t.ExpiresAt) {
			next.ExpiresAt = t.ExpiresAt
		}
		capped = next.ExpiresAt
		if !used.Valid {
			if _, err := tx.ExecContext(ctx, "UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ?", at, old[:]); err != nil {
				return fmt.Errorf("use refresh token: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO refresh_tokens (token_hash, family_id, username, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
			next.Hash[:], t.FamilyID, t.Username, next.CreatedAt, next.ExpiresAt); err != nil {
			return fmt.Errorf("insert refresh token: %w", err)
		}
		return nil
	}, nil)
	if err != nil {
		return identity.RefreshToken{}, time.Time{}, err
	}
	if reused {
		return identity.RefreshToken{}, time.Time{}, identity.ErrBadCredentials
	}
	return t, capped, nil
}

// RevokeRefreshFamily revokes the family of the token with hash.
func (s *Store) RevokeRefreshFamily(ctx context.Context, hash [sha256.Size]byte, at time.Time) (string, error) {
	var family, username string
	err := s.db.QueryRowContext(ctx, "SELECT family_id, username FROM refresh_tokens WHERE token_hash = ?", hash[:]).Scan(&family, &username)
	if errors.Is(err, sql.ErrNoRows) {
		return "", identity.ErrBadCredentials
	}
	if err != nil {
		return "", fmt.Errorf("select refresh token: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL", at, family); err != nil {
		return "", fmt.Errorf("revoke refresh family: %w", err)
	}
	return username, nil
}

func inList(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func keyArgs(keys []string) []any {
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = []byte(k)
	}
	return args
}

// CountAttempt counts one attempt for each key and returns the windows.
func (s *Store) CountAttempt(ctx context.Context, keys []string, window time.Duration, now time.Time) (map[string]identity.Window, error) {
	out := map[string]identity.Window{}
	if len(keys) == 0 {
		return out, nil
	}
	cutoff := now.Add(-window)
	for _, k := range keys {
		// A closed window starts over at this attempt. MariaDB assigns left
		// to right, so failures is computed from the old window_start.
		_, err := s.db.ExecContext(ctx, `INSERT INTO login_failures (k, window_start, failures) VALUES (?, ?, 1)
			ON DUPLICATE KEY UPDATE
			  failures = IF(window_start <= ?, 1, failures + 1),
			  window_start = IF(window_start <= ?, VALUES(window_start), window_start)`,
			[]byte(k), now, cutoff, cutoff)
		if err != nil {
			return nil, fmt.Errorf("count sign-in attempt: %w", err)
		}
	}
	// sql: the IN list is only placeholders.
	rows, err := s.db.QueryContext(ctx, "SELECT k, window_start, failures FROM login_failures WHERE k IN ("+inList(len(keys))+")", keyArgs(keys)...)
	if err != nil {
		return nil, fmt.Errorf("select sign-in attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k []byte
		var w identity.Window
		if err := rows.Scan(&k, &w.Start, &w.Attempts); err != nil {
			return nil, fmt.Errorf("select sign-in attempts: %w", err)
		}
		w.Start = w.Start.UTC()
		out[string(k)] = w
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select sign-in attempts: %w", err)
	}
	// Keep the table to the open windows: usernames sprayed by a guesser
	// must not pile up.
	if _, err := s.db.ExecContext(ctx, "DELETE FROM login_failures WHERE window_start <= ? LIMIT 100", cutoff); err != nil {
		return nil, fmt.Errorf("drop closed windows: %w", err)
	}
	return out, nil
}

// Forgive takes one attempt back from each key.
func (s *Store) Forgive(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	// sql: the IN list is only placeholders.
	if _, err := s.db.ExecContext(ctx, "UPDATE login_failures SET failures = failures - 1 WHERE failures > 0 AND k IN ("+inList(len(keys))+")", keyArgs(keys)...); err != nil {
		return fmt.Errorf("forgive sign-in attempt: %w", err)
	}
	return nil
}

// ResetFailures forgets the failures of keys.
func (s *Store) ResetFailures(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	// sql: the IN list is only placeholders.
	if _, err := s.db.ExecContext(ctx, "DELETE FROM login_failures WHERE k IN ("+inList(len(keys))+")", keyArgs(keys)...); err != nil {
		return fmt.Errorf("reset login failures: %w", err)
	}
	return nil
}

// SaveOIDCState stores a pending OIDC sign-in and drops expired ones.
func (s *Store) SaveOIDCState(ctx context.Context, st identity.OIDCState) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM oidc_states WHERE expires_at < ? LIMIT 100", time.Now().UTC()); err != nil {
		return fmt.Errorf("drop expired oidc states: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, "INSERT INTO oidc_states (state_hash, verifier, nonce, expires_at) VALUES (?, ?, ?, ?)",
		st.StateHash[:], st.Verifier, st.Nonce, st.ExpiresAt); err != nil {
		return fmt.Errorf("insert oidc state: %w", err)
	}
	return nil
}

// TakeOIDCState returns and deletes the unexpired state with hash.
func (s *Store) TakeOIDCState(ctx context.Context, hash [sha256.Size]byte, now time.Time) (identity.OIDCState, error) {
	var st identity.OIDCState
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, "SELECT verifier, nonce, expires_at FROM oidc_states WHERE state_hash = ? FOR UPDATE", hash[:]).
			Scan(&st.Verifier, &st.Nonce, &st.ExpiresAt)
		if errors.Is(err, sql.ErrNoRows) {
			return identity.ErrBadCredentials
		}
		if err != nil {
			return fmt.Errorf("select oidc state: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM oidc_states WHERE state_hash = ?", hash[:]); err != nil {
			return fmt.Errorf("delete oidc state: %w", err)
		}
		return nil
	}, nil)
	if err != nil {
		return identity.OIDCState{}, err
	}
	if !st.ExpiresAt.After(now) {
		return identity.OIDCState{}, identity.ErrBadCredentials
	}
	st.StateHash = hash
	return st, nil
}
