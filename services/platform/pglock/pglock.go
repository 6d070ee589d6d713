// Package pglock is the PostgreSQL advisory lock that makes one replica at a
// time the active one (the processor's and the alerts service's leader, the
// erasure runner) or keeps two jobs apart (the retention jobs).
//
// The lock is a session-level advisory lock held on a connection of its
// own, never a pooled one: PostgreSQL frees it when that session ends, so a
// holder that dies (kill -9, a cut network once the server notices) hands it
// over, and a pool never gets back a connection still holding it. The lock
// lives exactly as long as its session, so a held Lease checks that its
// session still holds it; a check that fails or stalls past its timeout
// marks the lease lost and closes the connection. Every wait is bounded:
// connecting, each try, each check and the unlock.
package pglock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"threatview/platform/pipeline"
)

var (
	// ErrHeld is returned by TryAcquire while another session holds the lock.
	ErrHeld = errors.New("the lock is held by another session")
	// ErrLost is the cause (wrapped) of a failed Check: the lock's session
	// ended, stalled past the check's timeout, or no longer holds the lock,
	// so the lock may be another session's by now.
	ErrLost = errors.New("lock lost")
)

// Config is one advisory lock.
type Config struct {
	// Name is the lock in logs and errors ("leader lock"); default "advisory lock".
	Name string
	// Holder names the other holders in the log line of a waiting
	// Acquire: "another processor holds the leader lock, waiting"; default
	// "replica".
	Holder string
	// URL is the database; ConnConfig, when set, is used instead (a copy).
	URL        string
	ConnConfig *pgx.ConnConfig
	// Key is the lock (pg_advisory_lock(bigint)). With TextKey set the key
	// is the server's hashtext(TextKey) instead, the lock that
	// pg_try_advisory_lock(hashtext('...')) takes.
	Key     int64
	TextKey string
	// Poll is how often a waiting Acquire tries again (default 1 s).
	Poll time.Duration
	// Timeout bounds connecting, one try and the unlock (default 5 s): a
	// stalled server never holds Acquire or Release up for longer.
	Timeout time.Duration
}

// Locker takes the lock; it is a pipeline.Locker.
type Locker struct {
	cfg Config
	log *slog.Logger
}

var _ pipeline.Locker = (*Locker)(nil)

// New returns the lock cfg describes; log nil is slog.Default().
func New(cfg Config, log *slog.Logger) *Locker {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Name == "" {
		cfg.Name = "advisory lock"
	}
	if cfg.Holder == "" {
		cfg.Holder = "replica"
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	return &Locker{cfg: cfg, log: log}
}

// NewLeader returns the leader loop over the lock cfg describes: tried every
// cfg.Poll while another replica leads, and checked every cfg.Poll while
// held, a check taking at most max(cfg.Poll, 2 s). gauge, when not nil, is 1
// while this replica leads.
func NewLeader(cfg Config, gauge prometheus.Gauge, log *slog.Logger) *pipeline.Leader {
	l := New(cfg, log)
	return pipeline.NewLeader(l, pipeline.LeaderConfig{
		Name: l.cfg.Name, CheckEvery: l.cfg.Poll, CheckTimeout: max(l.cfg.Poll, 2*time.Second), Gauge: gauge,
	}, log)
}

// Acquire connects and tries the lock every Poll until it holds it or ctx
// ends (it then returns ctx's error). Failures are logged and retried, on a
// new connection.
func (l *Locker) Acquire(ctx context.Context) (pipeline.Lease, error) {
	var conn *pgx.Conn
	waiting := false
	for {
		if conn == nil {
			c, err := l.connect(ctx)
			if err != nil && ctx.Err() == nil {
				l.log.Warn(l.cfg.Name+" connection failed", "err", err)
			}
			conn = c
		}
		if conn != nil {
			lease, err := l.try(ctx, conn)
			switch {
			case err == nil:
				return lease, nil
			case errors.Is(err, ErrHeld):
				if !waiting {
					l.log.Info("another " + l.cfg.Holder + " holds the " + l.cfg.Name + ", waiting")
					waiting = true
				}
			default:
				if ctx.Err() == nil {
					l.log.Warn(l.cfg.Name+" try failed", "err", err)
				}
				l.close(conn)
				conn = nil
			}
		}
		if !pipeline.Sleep(ctx, l.cfg.Poll) {
			if conn != nil {
				l.close(conn)
			}
			return nil, ctx.Err()
		}
	}
}

// TryAcquire tries the lock once: ErrHeld while another session holds it,
// another error when the database cannot be asked. Only a returned Lease
// keeps a connection open.
func (l *Locker) TryAcquire(ctx context.Context) (*Lease, error) {
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	lease, err := l.try(ctx, conn)
	if err != nil {
		l.close(conn)
		return nil, err
	}
	return lease, nil
}

func (l *Locker) connect(ctx context.Context) (*pgx.Conn, error) {
	var cfg *pgx.ConnConfig
	if l.cfg.ConnConfig != nil {
		cfg = l.cfg.ConnConfig.Copy()
	} else {
		var err error
		if cfg, err = pgx.ParseConfig(l.cfg.URL); err != nil {
			// The URL may hold a password: name the lock, not the URL.
			return nil, fmt.Errorf("%s: parse the database URL: %w", l.cfg.Name, err)
		}
	}
	if cfg.ConnectTimeout <= 0 || cfg.ConnectTimeout > l.cfg.Timeout {
		cfg.ConnectTimeout = l.cfg.Timeout
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: connect: %w", l.cfg.Name, err)
	}
	return c, nil
}

// The key comes back with the answer, so a TextKey lease knows the number
// its Check and unlock use.
const (
	tryKey     = "SELECT $1::int8, pg_try_advisory_lock($1::int8)"
	tryTextKey = "SELECT hashtext($1)::int8, pg_try_advisory_lock(hashtext($1))"
)

// try asks for the lock once on conn: a Lease, ErrHeld, or the failure.
func (l *Locker) try(ctx context.Context, conn *pgx.Conn) (*Lease, error) {
	tctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	q, arg := tryKey, any(l.cfg.Key)
	if l.cfg.TextKey != "" {
		q, arg = tryTextKey, l.cfg.TextKey
	}
	var key int64
	var ok bool
	// sql: q is one of the constants tryKey and tryTextKey; the key is an argument.
	if err := conn.QueryRow(tctx, q, arg).Scan(&key, &ok); err != nil {
		return nil, fmt.Errorf("%s: try: %w", l.cfg.Name, err)
	}
	if !ok {
		return nil, ErrHeld
	}
	return &Lease{l: l, conn: conn, key: key, lost: make(chan struct{})}, nil
}

func (l *Locker) close(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
	defer cancel()
	_ = c.Close(ctx)
}

// Lease is a held lock and the connection whose session holds it; it is a
// pipeline.Lease. Its methods may be called from any goroutine.
type Lease struct {
	l    *Locker
	key  int64
	mu   sync.Mutex // one statement at a time on conn
	conn *pgx.Conn  // nil once lost or released
	lost chan struct{}
	once sync.Once
}

// held asks whether this session still holds the lock: an advisory lock on
// a bigint key is classid = its high 32 bits, objid = its low 32 bits,
// objsubid = 1 in pg_locks.
const held = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
	AND pid = pg_backend_pid() AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND classid::int8 = $1 AND objid::int8 = $2 AND objsubid = 1)`

// Check returns nil while this lease's session still holds the lock, and
// an error wrapping ErrLost once it may be another's: the connection
// failed or stalled past ctx's deadline, or the session no longer holds
// it. A lost lease stays lost; its connection is closed at once.
func (a *Lease) Check(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn == nil {
		return fmt.Errorf("%s: %w", a.l.cfg.Name, ErrLost)
	}
	var ok bool
	err := a.conn.QueryRow(ctx, held, int64(uint32(a.key>>32)), int64(uint32(a.key))).Scan(&ok)
	if err == nil && ok {
		return nil
	}
	if err == nil {
		err = errors.New("the session no longer holds it")
	}
	a.drop()
	return fmt.Errorf("%s: %w: %w", a.l.cfg.Name, ErrLost, err)
}

// Lost is closed once a Check has found the lock lost.
func (a *Lease) Lost() <-chan struct{} { return a.lost }

// Release unlocks (unless the lease was lost) and closes the connection,
// which frees the lock in any case. It is safe to call more than once.
func (a *Lease) Release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.l.cfg.Timeout)
	defer cancel()
	if _, err := a.conn.Exec(ctx, "SELECT pg_advisory_unlock($1::int8)", a.key); err != nil {
		a.l.log.Warn(a.l.cfg.Name+" release failed; closing its connection releases it", "err", fmt.Sprint(err))
	}
	a.l.close(a.conn)
	a.conn = nil
}

// drop marks the lease lost and closes its connection; a.mu is held.
func (a *Lease) drop() {
	a.once.Do(func() { close(a.lost) })
	a.l.close(a.conn)
	a.conn = nil
}
