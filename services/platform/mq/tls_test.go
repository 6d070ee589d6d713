package mq_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"threatview/platform/mq"
)

// TestPublisher_TLS proves STOMP_TLS is honoured: the first bytes the broker
// sees are a TLS handshake record, not a plaintext STOMP CONNECT frame.
func TestPublisher_TLS(t *testing.T) {
	for _, tt := range []struct {
		name    string
		tls     bool
		wantTLS bool
	}{{"OK tls", true, true}, {"OK plain", false, false}} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			first := make(chan byte, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				b := make([]byte, 1)
				if _, err := c.Read(b); err == nil {
					first <- b[0]
				}
			}()
			pub := mq.NewPublisher(mq.Config{Addr: ln.Addr().String(), TLS: tt.tls, TLSServerName: "broker.example", Conns: 1,
				DialTimeout: 500 * time.Millisecond, ReceiptTimeout: 500 * time.Millisecond}, discard())
			defer pub.Close()
			err = pub.Ping(context.Background())
			if !errors.Is(err, mq.ErrUnavailable) {
				t.Fatalf("Ping to a silent peer = %v, want ErrUnavailable", err)
			}
			var b byte
			select {
			case b = <-first:
			case <-time.After(5 * time.Second):
				t.Fatal("peer saw no bytes")
			}
			const tlsHandshake = 0x16
			if got := b == tlsHandshake; got != tt.wantTLS {
				t.Fatalf("first byte %#x: TLS handshake = %v, want %v", b, got, tt.wantTLS)
			}
		})
	}
}
