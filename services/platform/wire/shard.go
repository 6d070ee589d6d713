package wire

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// EventsShard returns the shard (0 to shards-1) of an app's events: FNV-1a
// (32 bits) of the app id, modulo shards. The collector routes an app's
// events to queue EventsQueue+"."+shard with it (when shards > 1), so all of
// an app's events, re-sends included, meet one processor; anything that needs
// to know where an app's events went (tests, tools) uses this function, never
// its own copy. shards < 2 is shard 0.
func EventsShard(appID string, shards int) int {
	if shards < 2 {
		return 0
	}
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(appID); i++ {
		h ^= uint32(appID[i])
		h *= prime32
	}
	return int(h % uint32(shards))
}

// EventsQueues returns the events queue of each shard: base itself for one
// shard (the single queue of an unsharded deployment), else base+"."+i for
// shard i (/queue/threatview.events.0, .1, ...). The collector publishes to
// them, the chart names the processors' PROCESSOR_QUEUE and the admin
// interface lists their dead letters the same way.
func EventsQueues(base string, shards int) []string {
	if shards < 2 {
		return []string{base}
	}
	out := make([]string, shards)
	for i := range out {
		out[i] = base + "." + strconv.Itoa(i)
	}
	return out
}

// QueueShard is EventsQueues read backwards: the shard k of a queue named
// <base>.<k>, else 0 (base itself: the one queue of an unsharded
// deployment). A suffix of digits that is no shard number (above 32767,
// the outbox's and the rollups' smallint) is an error.
func QueueShard(queue string) (int, error) {
	i := strings.LastIndexByte(queue, '.')
	if i < 0 || i == len(queue)-1 || strings.Trim(queue[i+1:], "0123456789") != "" {
		return 0, nil
	}
	k, err := strconv.Atoi(queue[i+1:])
	if err != nil || k > math.MaxInt16 {
		return 0, fmt.Errorf("queue %q: shard %s is not 0 to %d", queue, queue[i+1:], math.MaxInt16)
	}
	return k, nil
}
