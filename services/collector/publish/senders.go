package publish

import (
	"context"
	"errors"
	"fmt"
	"time"

	"threatview/collector"
	"threatview/platform/auditclient"
	"threatview/platform/mq"
	"threatview/platform/wire"
)

// Envelope prefixes and suffixes of the wire formats (events: version
// wire.EventsVersion, each fragment one request, see
// collector.AppendRequest; audit: wire.AuditBatch). Both end with Suffix.
const (
	EventsPrefix = wire.EventsPrefix
	AuditPrefix  = wire.AuditPrefix
	Suffix       = wire.EventsSuffix
)

// ToBroker returns a SendFunc that publishes each message to dest as one
// persistent message with a receipt. Failures wrap collector.ErrUnavailable.
//
// A send that fails fast (a pooled connection the broker or a missed
// heart-beat already closed, a refused dial) is tried again, up to attempts
// times in all: nothing was written, and a fresh connection usually works.
// A slow failure (receipt timeout) is not retried; it may have been kept, and
// the client's retry after 503 is the safer place to send it again.
func ToBroker(p mq.Sender, dest string, attempts int) SendFunc {
	if attempts < 1 {
		attempts = 1
	}
	return func(ctx context.Context, body []byte, items int) error {
		var err error
		unconfirmed := false
		for i := 0; i < attempts; i++ {
			start := time.Now()
			if err = p.Send(ctx, dest, body, nil); err == nil {
				return nil
			}
			unconfirmed = unconfirmed || errors.Is(err, mq.ErrUnconfirmed)
			if time.Since(start) > fastFailure || ctx.Err() != nil {
				break
			}
		}
		if unconfirmed {
			return fmt.Errorf("publish %d events: %w: %w", items, collector.ErrUnconfirmed, err)
		}
		return fmt.Errorf("publish %d events: %w: %w", items, collector.ErrUnavailable, err)
	}
}

// TxSender is the part of mq.Publisher the paired broker sender needs.
type TxSender interface {
	SendTx(ctx context.Context, msgs []mq.Message) error
}

// ToBrokerTx returns a PairSendFunc that publishes each message to
// eventsDest and its paired message (the audit records of the same
// requests) to auditDest in one broker transaction: both are kept or
// neither. A message without a paired one goes alone. Failures wrap
// collector.ErrUnavailable; like ToBroker, a fast failure is retried, a
// receipt timeout is not (the transaction may have been committed: see the
// Idempotency-Key rule in the README).
func ToBrokerTx(p TxSender, eventsDest, auditDest string, attempts int) PairSendFunc {
	if attempts < 1 {
		attempts = 1
	}
	return func(ctx context.Context, body []byte, items int, aux []byte, auxItems int) error {
		msgs := []mq.Message{{Dest: eventsDest, Body: body}}
		if len(aux) > 0 {
			msgs = append(msgs, mq.Message{Dest: auditDest, Body: aux})
		}
		var err error
		unconfirmed := false
		for i := 0; i < attempts; i++ {
			start := time.Now()
			if err = p.SendTx(ctx, msgs); err == nil {
				return nil
			}
			unconfirmed = unconfirmed || errors.Is(err, mq.ErrUnconfirmed)
			if time.Since(start) > fastFailure || ctx.Err() != nil {
				break
			}
		}
		if unconfirmed {
			return fmt.Errorf("publish %d events with %d audit records: %w: %w", items, auxItems, collector.ErrUnconfirmed, err)
		}
		return fmt.Errorf("publish %d events with %d audit records: %w: %w", items, auxItems, collector.ErrUnavailable, err)
	}
}

// fastFailure is how quick a failed send must be to count as "nothing was
// written" and be retried.
const fastFailure = 250 * time.Millisecond

// ToAuditLogger returns a SendFunc that POSTs each message (a
// wire.AuditBatch) to the audit logger. Anything but a 2xx answer wraps
// collector.ErrUnavailable.
func ToAuditLogger(c *auditclient.Client) SendFunc {
	return func(ctx context.Context, body []byte, items int) error {
		if err := c.Post(ctx, body); err != nil {
			return fmt.Errorf("audit %d records: %w: %w", items, collector.ErrUnavailable, err)
		}
		return nil
	}
}
