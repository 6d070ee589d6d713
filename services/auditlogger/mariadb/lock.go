package mariadb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"threatview/platform/pipeline"
)

// LockBase is the name of the worker's lock; the database name is appended
// because MariaDB's named locks are server-wide and one server may hold
// several audit databases (one per environment, or per test).
const LockBase = "threatview.auditworker"

// ErrLockLost means the connection holding the lock is gone: another worker
// may hold it now.
var ErrLockLost = errors.New("worker lock lost")

// Lock is a held MariaDB named lock (GET_LOCK) on a dedicated connection.
// The server releases it when that connection ends, so a worker that dies
// frees it for the one waiting.
type Lock struct {
	conn *sql.Conn
	name string
}

// LockName returns the lock name for the database db is connected to.
func LockName(ctx context.Context, db *sql.DB) (string, error) {
	var dbName sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return "", fmt.Errorf("read database name: %w", err)
	}
	name := LockBase + "." + dbName.String
	if len(name) > 64 { // MariaDB's limit on lock names
		sum := sha256.Sum256([]byte(dbName.String))
		name = LockBase + "." + hex.EncodeToString(sum[:12])
	}
	return name, nil
}

// Acquire waits until it holds the lock name or ctx ends. Each GET_LOCK call
// waits at most wait; waiting is logged by the caller through onWait, called
// after every unsuccessful attempt.
func Acquire(ctx context.Context, db *sql.DB, name string, wait time.Duration, onWait func()) (*Lock, error) {
	secs := max(1, int(wait/time.Second))
	for {
		conn, err := db.Conn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("lock connection: %w", err)
		}
		for {
			var got sql.NullInt64
			err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, secs).Scan(&got)
			if err != nil {
				break
			}
			if got.Valid && got.Int64 == 1 {
				return &Lock{conn: conn, name: name}, nil
			}
			if onWait != nil {
				onWait()
			}
			if ctx.Err() != nil {
				break
			}
		}
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The connection failed: back off and start over on a fresh one.
		if !pipeline.Sleep(ctx, time.Second) {
			return nil, ctx.Err()
		}
	}
}

// WorkerLock is the audit worker's pipeline.Locker: the named lock of the
// database it is connected to (see LockName), taken with Acquire.
type WorkerLock struct {
	db   *sql.DB
	wait time.Duration
	log  *slog.Logger
	name string
}

// NewWorkerLock returns the worker lock of db; each GET_LOCK call waits at
// most wait.
func NewWorkerLock(db *sql.DB, wait time.Duration, log *slog.Logger) *WorkerLock {
	return &WorkerLock{db: db, wait: wait, log: log}
}

// Acquire waits until it holds the worker lock or ctx ends, logging once
// that another instance holds it.
func (w *WorkerLock) Acquire(ctx context.Context) (pipeline.Lease, error) {
	if w.name == "" {
		name, err := LockName(ctx, w.db)
		if err != nil {
			return nil, err
		}
		w.name = name
	}
	w.log.Info("waiting for worker lock", "lock", w.name)
	warned := false
	l, err := Acquire(ctx, w.db, w.name, w.wait, func() {
		if !warned {
			w.log.Info("worker lock held by another instance; standing by", "lock", w.name)
			warned = true
		}
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Check confirms the lock is still held by this connection; it returns an
// error wrapping ErrLockLost otherwise.
func (l *Lock) Check(ctx context.Context) error {
	var mine sql.NullInt64
	err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name).Scan(&mine)
	if err != nil {
		return fmt.Errorf("check lock %s: %w: %w", l.name, ErrLockLost, err)
	}
	if !mine.Valid || mine.Int64 != 1 {
		return fmt.Errorf("check lock %s: %w", l.name, ErrLockLost)
	}
	return nil
}

// Release frees the lock and its connection.
func (l *Lock) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = l.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", l.name)
	_ = l.conn.Close()
}
