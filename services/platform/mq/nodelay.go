package mq

import (
	"crypto/tls"
	"net"
)

// Why every broker connection sets no-delay and quick ACKs.
//
// A transaction's SENDs each ask for a receipt and the COMMIT goes only
// after all of them came back (a refused SEND must be known before the
// COMMIT). The broker answers with one small RECEIPT frame per SEND, each its
// own TCP write. With Nagle's algorithm on at the broker, a small write is
// held while an earlier one is unacknowledged; the client, which has nothing
// to send until the last receipt arrives, delays its ACK (Linux: up to
// 40 ms). Each transaction then waited one delayed-ACK timer: 105 req/s
// answered at a p50 of 50 ms instead of 4 ms (issue 36).
//
// The broker side is fixed where we configure it (transport.tcpNoDelay=true
// on the connectors of deploy/activemq/activemq.xml). A managed broker
// (Amazon MQ) does not let us set its connectors, so the client must not rely
// on it: it turns quick ACK mode on before every read, so its ACKs leave at
// once and a Nagle-held RECEIPT is released after one round trip, not 40 ms.
// Go sets TCP_NODELAY on every TCP connection by default; it is set again
// here so the client's own frames (always written in one write per exchange)
// never wait either.

// tuneConn sets no-delay on the TCP connection under c and returns c wrapped
// so that every read first asks for quick ACKs. Connections that are not TCP
// (tests' pipes) are returned as they are.
func tuneConn(c net.Conn) net.Conn {
	under := c
	if t, ok := c.(*tls.Conn); ok {
		under = t.NetConn()
	}
	tcp, ok := under.(*net.TCPConn)
	if !ok {
		return c
	}
	_ = tcp.SetNoDelay(true)
	raw, err := tcp.SyscallConn()
	if err != nil || !quickACKSupported {
		return c
	}
	if t, ok := c.(*tls.Conn); ok {
		// The TLS connection reads the socket under it: quick ACKs are set
		// on that socket before each TLS read.
		return &quickACKTLS{Conn: t, rc: raw}
	}
	return &quickACKConn{TCPConn: tcp, rc: raw}
}

// quickACKConn is a TCP connection that asks for quick ACKs before each read.
type quickACKConn struct {
	*net.TCPConn
	rc rawConn
}

func (c *quickACKConn) Read(p []byte) (int, error) {
	setQuickACK(c.rc)
	return c.TCPConn.Read(p)
}

// quickACKTLS is a TLS connection that asks its socket for quick ACKs
// before each read.
type quickACKTLS struct {
	*tls.Conn
	rc rawConn
}

func (c *quickACKTLS) Read(p []byte) (int, error) {
	setQuickACK(c.rc)
	return c.Conn.Read(p)
}
