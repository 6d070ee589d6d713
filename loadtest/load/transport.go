package load

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// connTransport is the load generator's HTTP/1.1 client transport: the
// caller's goroutine writes the request and reads the response itself over a
// kept-alive connection from an idle pool. net/http's Transport gives every
// connection a read loop and a write loop goroutine and hands each request to
// them and back; on a 2-core machine shared with the stack under test, those
// hand-offs (thread wake-ups, futex, the scheduler looking for work) were a
// third of the generator's CPU in its profile, and every cycle the generator
// spends is one the machine-wide CPU-per-request figure charges to the stack.
//
// It speaks plain HTTP/1.1 to one kind of server: no proxies, TLS, HTTP/2,
// redirects or transparent gzip. A connection goes back to the pool only when
// its response was read to the end and the server did not ask to close it; an
// error of any kind closes it. A request is never retried.
type connTransport struct {
	timeout     time.Duration // per request, from the first byte written to the last read
	idleTimeout time.Duration // an idle connection older than this is closed, not reused
	dialer      net.Dialer

	mu   sync.Mutex
	idle []*pooledConn // LIFO: the most recently used connection first
}

type pooledConn struct {
	net.Conn
	host     string // the address it was dialled to (the request URL's host)
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
}

// maxIdle bounds the pool; a generator holds at most MaxUsers connections.
const maxIdle = MaxUsers

func newConnTransport(timeout time.Duration) *connTransport {
	return &connTransport{
		timeout:     timeout,
		idleTimeout: 30 * time.Second, // under the collector's keep-alive limit
		dialer:      net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
	}
}

var errNotPlainHTTP = errors.New("load transport: only http:// URLs")

// RoundTrip implements http.RoundTripper.
func (t *connTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		closeBody(req)
		return nil, errNotPlainHTTP
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	c, err := t.get(ctx, req.URL.Host)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if err := c.SetDeadline(time.Now().Add(t.timeout)); err != nil {
		c.Close()
		closeBody(req)
		return nil, err
	}
	// A cancelled context (the end of a closed-model run) aborts the
	// exchange by moving the deadline into the past; the connection is then
	// not reused. The context is done before the abort, so the caller sees
	// its error rather than a timeout.
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	}
	fail := func(err error) (*http.Response, error) {
		stop()
		c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	if err := req.Write(c.bw); err != nil { // closes req.Body
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return fail(err)
	}
	resp.Body = &connBody{ReadCloser: resp.Body, t: t, c: c, keep: !resp.Close, stop: stop}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// get returns an idle connection to host, or dials a new one.
func (t *connTransport) get(ctx context.Context, host string) (*pooledConn, error) {
	now := time.Now()
	t.mu.Lock()
	for n := len(t.idle); n > 0; n = len(t.idle) {
		c := t.idle[n-1]
		t.idle = t.idle[:n-1]
		if now.Sub(c.lastUsed) < t.idleTimeout && c.host == host {
			t.mu.Unlock()
			return c, nil
		}
		c.Close()
	}
	t.mu.Unlock()
	nc, err := t.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	return &pooledConn{Conn: nc, host: host, br: bufio.NewReaderSize(nc, 4<<10), bw: bufio.NewWriterSize(nc, 16<<10)}, nil
}

func (t *connTransport) put(c *pooledConn) {
	c.lastUsed = time.Now()
	t.mu.Lock()
	if len(t.idle) < maxIdle {
		t.idle = append(t.idle, c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// CloseIdleConnections closes every pooled connection.
func (t *connTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// connBody hands its connection back to the pool once the response has been
// read to the end and closed.
type connBody struct {
	io.ReadCloser
	t    *connTransport
	c    *pooledConn
	keep bool
	stop func() bool // false once the context's abort has run
}

func (b *connBody) Close() error {
	if b.c == nil {
		return nil
	}
	// A response body from http.ReadResponse drains itself on Close, so the
	// connection is at the next response's first byte when Close succeeds.
	err := b.ReadCloser.Close()
	if b.stop() && err == nil && b.keep {
		b.t.put(b.c)
	} else {
		b.c.Close()
	}
	b.c = nil
	return err
}
