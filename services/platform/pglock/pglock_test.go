package pglock_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"threatview/platform/pglock"
	"threatview/platform/pipeline"
	"threatview/platform/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

const (
	key  int64 = -0x0123456789abcd // high and low halves both used, one negative
	poll       = 50 * time.Millisecond
)

// db is a fresh database (advisory locks are per database) and a
// connection of the test's own to look at its sessions.
func db(t *testing.T) (*pgx.ConnConfig, *pgx.Conn) {
	t.Helper()
	url := testenv.MustPostgres(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return cfg, conn
}

// sessions counts the other sessions on the test's database.
func sessions(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// holder is the pid of the session holding the lock, or 0.
func holder(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var pid int
	err := c.QueryRow(context.Background(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !f(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// contender is one replica running a Leader over the lock.
type contender struct {
	leader *pipeline.Leader
	terms  chan context.Context // fn's context, each time it leads
	done   chan error
	stop   context.CancelFunc
}

func contend(t *testing.T, cfg pglock.Config) *contender {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	c := &contender{leader: pglock.NewLeader(cfg, nil, quiet), terms: make(chan context.Context, 8),
		done: make(chan error, 1), stop: stop}
	go func() {
		c.done <- c.leader.Run(ctx, func(fctx context.Context) error {
			c.terms <- fctx
			<-fctx.Done()
			return nil
		})
	}()
	t.Cleanup(c.shutdown)
	return c
}

func (c *contender) leads() bool { return c.leader.Ready(context.Background()) == nil }

func (c *contender) shutdown() {
	c.stop()
	<-c.done
	c.done <- nil // shutdown may be called again
}

func term(t *testing.T, c *contender, d time.Duration, what string) context.Context {
	t.Helper()
	select {
	case ctx := <-c.terms:
		return ctx
	case <-time.After(d):
		t.Fatalf("%s never led", what)
		return nil
	}
}

func leaders(cs []*contender) (n int, which *contender) {
	for _, c := range cs {
		if c.leads() {
			n++
			which = c
		}
	}
	return n, which
}

// TestLeader_OneOfMany: of three replicas exactly one leads at any moment;
// stopping it hands the lock to another; once all stop, the lock is free
// and no connection is left open.
func TestLeader_OneOfMany(t *testing.T) {
	connCfg, c := db(t)
	cfg := pglock.Config{Name: "test lock", ConnConfig: connCfg, Key: key, Poll: poll}
	cs := []*contender{contend(t, cfg), contend(t, cfg), contend(t, cfg)}
	eventually(t, 10*time.Second, "a leader", func() bool { n, _ := leaders(cs); return n == 1 })
	for i := 0; i < 20; i++ {
		if n, _ := leaders(cs); n != 1 {
			t.Fatalf("%d replicas lead at once", n)
		}
		time.Sleep(poll)
	}
	_, first := leaders(cs)
	pid := holder(t, c)
	if pid == 0 {
		t.Fatal("no session holds the lock while a replica leads")
	}
	first.shutdown()
	eventually(t, 10*time.Second, "another replica leading", func() bool {
		n, l := leaders(cs)
		return n == 1 && l != first
	})
	if p := holder(t, c); p == pid || p == 0 {
		t.Errorf("lock holder after hand-over = %d, want a session other than %d", p, pid)
	}
	for _, x := range cs {
		x.shutdown()
	}
	if p := holder(t, c); p != 0 {
		t.Errorf("session %d still holds the lock after every replica stopped", p)
	}
	eventually(t, 5*time.Second, "every lock connection closed", func() bool { return sessions(t, c) == 0 })
}

// TestLeader_BackendTerminated: the leader's session is terminated (a
// crash of its backend, an administrator, a failover); the leader learns it
// lost the lock (fn's context ends with ErrLost) and the other replica takes
// over. The first replica then waits as the standby.
func TestLeader_BackendTerminated(t *testing.T) {
	connCfg, c := db(t)
	cfg := pglock.Config{Name: "test lock", ConnConfig: connCfg, Key: key, Poll: poll}
	a := contend(t, cfg)
	aTerm := term(t, a, 10*time.Second, "the first replica")
	b := contend(t, cfg)
	time.Sleep(5 * poll)
	if b.leads() {
		t.Fatal("the second replica leads while the first holds the lock")
	}

	var ok bool
	if err := c.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", holder(t, c)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
	}
	select {
	case <-aTerm.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first replica kept leading after its session was terminated")
	}
	if cause := context.Cause(aTerm); !errors.Is(cause, pglock.ErrLost) {
		t.Errorf("the first replica's term ended with %v, want ErrLost", cause)
	}
	if a.leads() {
		t.Error("the first replica reports leading after losing the lock")
	}
	// Either may take the free lock; exactly one does, and it stays so.
	eventually(t, 10*time.Second, "a new leader", func() bool { n, _ := leaders([]*contender{a, b}); return n == 1 })
	for i := 0; i < 10; i++ {
		if a.leads() && b.leads() {
			t.Fatal("both replicas lead")
		}
		time.Sleep(poll)
	}
	if holder(t, c) == 0 {
		t.Error("a replica leads but no session holds the lock")
	}
}

// TestLeader_Stalled: the network between the leader and PostgreSQL stalls
// (packets stop, nothing closes). The leader gives up leading within a
// check's period and timeout, and tries again without hanging on the
// stalled path. While the server still sees the stalled session, it keeps
// the lock and nobody else leads; once the server drops that session (here
// the path is cut) the standby takes over.
func TestLeader_Stalled(t *testing.T) {
	connCfg, c := db(t)
	p := newProxy(t, net.JoinHostPort(connCfg.Host, strconv.Itoa(int(connCfg.Port))))
	viaProxy := connCfg.Copy()
	viaProxy.Host, viaProxy.Port, viaProxy.Fallbacks = p.host, p.port, nil

	a := contend(t, pglock.Config{Name: "test lock", ConnConfig: viaProxy, Key: key, Poll: poll, Timeout: time.Second})
	aTerm := term(t, a, 10*time.Second, "the replica behind the proxy")
	b := contend(t, pglock.Config{Name: "test lock", ConnConfig: connCfg, Key: key, Poll: poll, Timeout: time.Second})
	time.Sleep(5 * poll)
	if b.leads() {
		t.Fatal("the standby leads while the first holds the lock")
	}

	p.stall()
	stalled := time.Now()
	// A check every poll, taking at most max(poll, 2 s): lost within ~2.1 s.
	select {
	case <-aTerm.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leader kept leading on a stalled connection")
	}
	if took := time.Since(stalled); took > 3*time.Second {
		t.Errorf("the leader stopped %s after the stall, want within a check's period and timeout", took)
	}
	if cause := context.Cause(aTerm); !errors.Is(cause, pglock.ErrLost) {
		t.Errorf("the leader's term ended with %v, want ErrLost", cause)
	}
	// The server still sees the stalled session holding the lock: the
	// standby must not lead, nor the stalled one again.
	time.Sleep(time.Second)
	if b.leads() || a.leads() {
		t.Fatalf("a replica leads while the stalled session holds the lock (a %v, b %v)", a.leads(), b.leads())
	}
	p.cut()
	took := time.Now()
	eventually(t, 10*time.Second, "the standby taking over", b.leads)
	t.Logf("standby led %s after the stalled session was cut", time.Since(took).Round(time.Millisecond))
	for i := 0; i < 10; i++ {
		if a.leads() {
			t.Fatal("both replicas lead after the path came back")
		}
		time.Sleep(poll)
	}
	a.shutdown()
	b.shutdown()
	eventually(t, 5*time.Second, "every lock connection closed", func() bool { return sessions(t, c) == 0 })
}

// TestTryAcquire: one try, ErrHeld while another session holds the lock
// and no connection left behind; TextKey is the lock of
// pg_try_advisory_lock(hashtext(...)) taken elsewhere; Release frees it
// at once and may be called twice.
func TestTryAcquire(t *testing.T) {
	connCfg, c := db(t)
	ctx := context.Background()
	l := pglock.New(pglock.Config{ConnConfig: connCfg, TextKey: "threatview.test"}, quiet)
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext('threatview.test'))").Scan(&ok); err != nil || !ok {
		t.Fatalf("lock on the test's connection = %v, %v", ok, err)
	}
	if _, err := l.TryAcquire(ctx); !errors.Is(err, pglock.ErrHeld) {
		t.Fatalf("TryAcquire while held elsewhere = %v, want ErrHeld", err)
	}
	if n := sessions(t, c); n != 0 {
		t.Errorf("%d sessions left open by a refused TryAcquire", n)
	}
	if _, err := c.Exec(ctx, "SELECT pg_advisory_unlock(hashtext('threatview.test'))"); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire on a free lock = %v", err)
	}
	if err := lease.Check(ctx); err != nil {
		t.Errorf("Check of a held lease = %v", err)
	}
	if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext('threatview.test'))").Scan(&ok); err != nil || ok {
		t.Fatalf("the same text key taken elsewhere while the lease holds it = %v, %v", ok, err)
	}
	lease.Release()
	lease.Release()
	if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext('threatview.test'))").Scan(&ok); err != nil || !ok {
		t.Fatalf("lock after Release = %v, %v, want free", ok, err)
	}
	if err := lease.Check(ctx); !errors.Is(err, pglock.ErrLost) {
		t.Errorf("Check after Release = %v, want ErrLost", err)
	}
	eventually(t, 5*time.Second, "the lease's connection closed", func() bool { return sessions(t, c) == 0 })

	t.Run("Unreachable", func(t *testing.T) {
		dead := connCfg.Copy()
		dead.Host, dead.Port, dead.Fallbacks = "127.0.0.1", 1, nil
		if _, err := pglock.New(pglock.Config{ConnConfig: dead, Key: key}, quiet).TryAcquire(ctx); err == nil || errors.Is(err, pglock.ErrHeld) {
			t.Errorf("TryAcquire with the database unreachable = %v, want a connection error", err)
		}
	})
}

// TestLease_CheckAfterSessionEnded: used without a Leader (as a one-off
// job does), a lease whose session ended reports ErrLost on its next Check
// and closes Lost; Release after that does nothing and does not block.
func TestLease_CheckAfterSessionEnded(t *testing.T) {
	connCfg, c := db(t)
	ctx := context.Background()
	lease, err := pglock.New(pglock.Config{ConnConfig: connCfg, Key: key}, quiet).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_terminate_backend($1)", holder(t, c)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
	}
	select {
	case <-lease.Lost():
		t.Fatal("Lost closed before any Check")
	default:
	}
	if err := lease.Check(ctx); !errors.Is(err, pglock.ErrLost) {
		t.Fatalf("Check after the session ended = %v, want ErrLost", err)
	}
	select {
	case <-lease.Lost():
	default:
		t.Error("Lost not closed after a failed Check")
	}
}

// proxy forwards TCP to PostgreSQL; stall stops every byte both ways
// without closing anything (a network that stops answering), cut closes
// every connection and lets new ones through again.
type proxy struct {
	host    string
	port    uint16
	ln      net.Listener
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	resume  chan struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr)
	p := &proxy{host: a.IP.String(), port: uint16(a.Port), ln: ln, resume: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	return p
}

// pipe copies src to dst, holding what it read while the proxy is stalled.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			resume := p.resume
			p.mu.Unlock()
			if p.stalled.Load() {
				<-resume
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) || !p.stalled.Load() {
				dst.Close()
			}
			return
		}
	}
}

func (p *proxy) stall() { p.stalled.Store(true) }

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	if p.stalled.Swap(false) {
		close(p.resume)
		p.resume = make(chan struct{})
	}
}
