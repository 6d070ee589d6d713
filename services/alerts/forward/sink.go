package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"threatview/alerts"
	"threatview/alerts/egress"
)

// sendTimeout bounds one connection attempt and one batch's write or POST:
// a stalled destination fails the batch, which is then sent again.
const sendTimeout = 15 * time.Second

// NewSink returns the sink of f. cfg.Version names our build in CEF and
// OCSF, cfg.S3 is where s3 forwarders' buckets are, and cfg.Guard decides
// which addresses syslog and HTTP sinks may connect to (nil:
// egress.NewGuard(nil), no private address).
func NewSink(f *alerts.Forwarder, cfg Config) (alerts.Sink, error) {
	u, err := url.Parse(f.URL)
	if err != nil {
		return nil, fmt.Errorf("forwarder %s url: %w", f.ID, err)
	}
	var tlsConf *tls.Config
	if u.Scheme == "tls" || u.Scheme == "https" {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
		if f.CAPEM != "" {
			pool, err := alerts.CertPool(f.CAPEM)
			if err != nil {
				return nil, err
			}
			tlsConf.RootCAs = pool
		}
	}
	guard := cfg.Guard
	if guard == nil {
		guard = egress.NewGuard(nil)
	}
	enc := encoder{format: f.Format, version: cfg.Version}
	switch f.Type {
	case alerts.ForwardSyslog:
		return &Syslog{addr: u.Host, tls: tlsConf, enc: enc, hostname: cfg.Host, dial: guard.DialContext}, nil
	case alerts.ForwardHTTP:
		h := &HTTP{url: f.URL, enc: enc, client: &http.Client{Transport: egress.Transport(guard, tlsConf), Timeout: sendTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		if f.SecretHeader != nil {
			h.header, h.secret = f.SecretHeader.Name, f.SecretHeader.Value
		}
		return h, nil
	case alerts.ForwardS3:
		return NewS3(context.Background(), f.URL, cfg.Version, cfg.S3)
	}
	return nil, fmt.Errorf("forwarder %s: type %s has no sink in this build", f.ID, f.Type)
}

type encoder struct{ format, version string }

// message appends e's message in the forwarder's format (OCSF without its
// newline inside syslog).
func (c encoder) message(b []byte, e *alerts.Event) []byte {
	if c.format == alerts.FormatOCSF {
		b = AppendOCSF(b, e, c.version)
		return b[:len(b)-1]
	}
	return AppendCEF(b, e, c.version)
}

// Syslog sends RFC 5424 messages with octet-counting framing (RFC 6587
// 3.4.1) over TCP, or TLS (RFC 5425), on one connection kept open between
// batches. TCP acknowledges nothing to the sender: a batch written just
// before the receiver dies may be lost with it; every later failure makes
// the batch be written again on a new connection (duplicates carry the same
// event_id).
type Syslog struct {
	addr     string
	dial     egress.DialFunc
	tls      *tls.Config
	enc      encoder
	hostname string
	conn     net.Conn
	buf, msg []byte
}

// Send writes events as one burst of frames.
func (s *Syslog) Send(ctx context.Context, events []alerts.Event) error {
	if s.conn != nil && peerClosed(s.conn) {
		s.Close()
	}
	if s.conn == nil {
		dctx, cancel := context.WithTimeout(ctx, sendTimeout)
		c, err := s.dial(dctx, "tcp", s.addr)
		if err == nil && s.tls != nil {
			tc := tls.Client(c, s.tls)
			if err = tc.HandshakeContext(dctx); err != nil {
				c.Close()
			}
			c = tc
		}
		cancel()
		if err != nil {
			return fmt.Errorf("syslog connect %s: %w", s.addr, err)
		}
		s.conn = c
	}
	s.buf = s.buf[:0]
	for i := range events {
		s.msg = AppendSyslog(s.msg[:0], &events[i], s.hostname, s.enc.message(nil, &events[i]))
		s.buf = strconv.AppendInt(s.buf, int64(len(s.msg)), 10)
		s.buf = append(s.buf, ' ')
		s.buf = append(s.buf, s.msg...)
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(sendTimeout))
	if _, err := s.conn.Write(s.buf); err != nil {
		s.Close()
		return fmt.Errorf("syslog write to %s: %w", s.addr, err)
	}
	return nil
}

// peerClosed reports a connection the receiver closed (a syslog receiver
// never writes, so any read result but a timeout means it is gone).
func peerClosed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var one [1]byte
	_, err := c.Read(one[:])
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// Close closes the connection.
func (s *Syslog) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// HTTP POSTs a batch as newline-delimited JSON; a 2xx answer means it was
// taken.
type HTTP struct {
	url string
	// header and secret are the forwarder's secret header, if any.
	header, secret string
	enc            encoder
	client         *http.Client
	buf            []byte
}

// Send posts events as one body.
func (h *HTTP) Send(ctx context.Context, events []alerts.Event) error {
	h.buf = h.buf[:0]
	for i := range events {
		h.buf = h.enc.message(h.buf, &events[i])
		h.buf = append(h.buf, '\n')
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(h.buf))
	if err != nil {
		return fmt.Errorf("http forward: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if h.header != "" {
		req.Header.Set(h.header, h.secret)
	}
	resp, err := h.client.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		// Not the URL: its path or query may hold the destination's token,
		// and the error is stored as the forwarder's last_error.
		return fmt.Errorf("http forward: %s: %w", ue.Op, ue.Err)
	}
	if err != nil {
		return fmt.Errorf("http forward: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("http forward: destination answered %d", resp.StatusCode)
	}
	return nil
}

// Close releases idle connections.
func (h *HTTP) Close() error {
	h.client.CloseIdleConnections()
	return nil
}
