//go:build !linux

package mq

import "syscall"

type rawConn = syscall.RawConn

// Quick ACK mode is Linux's; elsewhere the broker's tcpNoDelay is the fix.
const quickACKSupported = false

func setQuickACK(rawConn) {}
