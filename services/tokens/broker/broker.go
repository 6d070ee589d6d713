// Package broker announces revocations on a broker topic that every
// collector follows (see the collector's tokenauth package).
package broker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"threatview/platform/mq"
	"threatview/platform/wire"
	"threatview/tokens"
)

// Announcer publishes revocations on a topic.
type Announcer struct {
	send  mq.Sender
	topic string
}

// New returns an Announcer publishing on topic through send.
func New(send mq.Sender, topic string) *Announcer { return &Announcer{send: send, topic: topic} }

// Announce publishes t's revocation as a persistent message and returns
// after the broker's receipt. Errors wrap tokens.ErrNotAnnounced.
func (a *Announcer) Announce(ctx context.Context, t tokens.Token) error {
	rev := wire.Revocation{V: 1, TokenID: t.ID, AppID: t.AppID, TokenSHA256: hex.EncodeToString(t.Hash[:])}
	if t.RevokedAt != nil {
		rev.RevokedAt = t.RevokedAt.UTC().Format(time.RFC3339Nano)
	}
	body, err := json.Marshal(rev)
	if err != nil {
		return fmt.Errorf("%w: %w", tokens.ErrNotAnnounced, err)
	}
	if err := a.send.Send(ctx, a.topic, body, nil); err != nil {
		return fmt.Errorf("%w: %w", tokens.ErrNotAnnounced, err)
	}
	return nil
}
