package publish

import "threatview/platform/wire"

// Shards routes each request to the Group of its app's shard
// (wire.EventsShard), so all of an app's events travel on one queue and meet
// one processor, while requests still coalesce with the others of their
// shard. A request always carries one app's events (the token binds the app:
// collector.CheckApp refuses any other app with 403), so a request is never
// split across shards.
type Shards struct {
	groups []*Group
}

// NewShards returns the router over groups, one per shard, shard i's group
// at index i. It panics without a group.
func NewShards(groups ...*Group) *Shards {
	if len(groups) == 0 {
		panic("publish.NewShards without a group")
	}
	return &Shards{groups: groups}
}

// For returns the Group of appID's shard.
func (s *Shards) For(appID string) *Group {
	return s.groups[wire.EventsShard(appID, len(s.groups))]
}

// Flush waits for every shard's messages in flight.
func (s *Shards) Flush() {
	for _, g := range s.groups {
		g.Flush()
	}
}

// ShardQueues returns the events queue of each shard (wire.EventsQueues).
func ShardQueues(base string, shards int) []string { return wire.EventsQueues(base, shards) }

// MaxShards bounds COLLECTOR_SHARDS: each shard is a queue, a processor
// and a statistics reader's pair of requests every interval.
const MaxShards = 64
