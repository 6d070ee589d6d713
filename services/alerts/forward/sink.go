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
)

// sendTimeout bounds one connection attempt and one batch's write or POST:
// a stalled destination fails the batch, which is then sent again.
const sendTimeout = 15 * time.Second

// NewSink returns the sink of f. version names our build in CEF and OCSF;
// s3cfg is where s3 forwarders' buckets are.
func NewSink(f *alerts.Forwarder, version, hostname string, s3cfg S3Config) (alerts.Sink, error) {
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
	enc := encoder{format: f.Format, version: version}
	switch f.Type {
	case alerts.ForwardSyslog:
		return &Syslog{addr: u.Host, tls: tlsConf, enc: enc, hostname: hostname}, nil
	case alerts.ForwardHTTP:
		tr := &http.Transport{TLSClientConfig: tlsConf, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}
		return &HTTP{url: f.URL, enc: enc, client: &http.Client{Transport: tr, Timeout: sendTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
	case alerts.ForwardS3:
		return NewS3(context.Background(), f.URL, version, s3cfg)
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
		d := net.Dialer{Timeout: sendTimeout}
		var c net.Conn
		var err error
		if s.tls != nil {
			td := tls.Dialer{NetDialer: &d, Config: s.tls}
			c, err = td.DialContext(ctx, "tcp", s.addr)
		} else {
			c, err = d.DialContext(ctx, "tcp", s.addr)
		}
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
	url    string
	enc    encoder
	client *http.Client
	buf    []byte
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
	resp, err := h.client.Do(req)
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
