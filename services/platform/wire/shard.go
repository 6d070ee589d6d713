package wire

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
