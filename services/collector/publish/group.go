// Package publish makes accepted requests durable with the platform's group
// commit (pipeline.Group): the JSON fragments of concurrent requests travel
// in one message (one broker send with one receipt, or one HTTP POST to the
// audit logger), and every request waits for the outcome of the message that
// carries it.
//
// A paired Group (NewPaired) carries each request's audit record beside its
// events, gathered into a second message that the PairSendFunc makes durable
// together with the first (one broker transaction): a request's events and
// its audit record are kept together or not at all.
package publish

import (
	"context"

	"threatview/collector"
	"threatview/platform/pipeline"
)

// Group gathers requests' fragments into messages (pipeline.Group).
type Group = pipeline.Group

// Ticket is a request's place in a message.
type Ticket = pipeline.Ticket

// Options configure a Group. Unavailable defaults to
// collector.ErrUnavailable.
type Options = pipeline.GroupOptions

// SendFunc makes one message durable. body is the complete message; items is
// the number of items (events, audit records) in it. It must return within
// the ctx deadline and must not keep body after returning.
type SendFunc func(ctx context.Context, body []byte, items int) error

// PairSendFunc makes a message and its paired message durable together, all
// or nothing. aux is the complete paired message (AuxPrefix, the requests'
// aux fragments, Suffix), nil when no request in the message brought one.
type PairSendFunc func(ctx context.Context, body []byte, items int, aux []byte, auxItems int) error

// ErrTimeout is returned to the requests of a message that found no free
// send slot before its timeout. It comes wrapped with
// collector.ErrUnavailable.
var ErrTimeout = pipeline.ErrTimeout

// New returns a Group sending with send; a request with a paired fragment
// fails on it (nothing could keep the pair).
func New(opt Options, send SendFunc) *Group {
	return pipeline.NewGroup(defaults(opt), func(ctx context.Context, b pipeline.Batch) error {
		return send(ctx, b.Body, b.Items)
	})
}

// NewPaired returns a Group whose requests may bring a paired fragment
// (AddPair), sent with send together with the message.
func NewPaired(opt Options, send PairSendFunc) *Group {
	return pipeline.NewPairedGroup(defaults(opt), func(ctx context.Context, b pipeline.Batch) error {
		return send(ctx, b.Body, b.Items, b.Aux, b.AuxItems)
	})
}

func defaults(opt Options) Options {
	if opt.Unavailable == nil {
		opt.Unavailable = collector.ErrUnavailable
	}
	return opt
}
