package mq

import (
	"syscall"
)

type rawConn = syscall.RawConn

const quickACKSupported = true

// setQuickACK turns quick ACK mode on (Linux: TCP_QUICKACK). The kernel
// leaves the mode by itself after a while, so it is set before every read.
func setQuickACK(rc rawConn) {
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}
