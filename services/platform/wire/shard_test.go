package wire_test

import (
	"fmt"
	"hash/fnv"
	"testing"

	"threatview/platform/wire"
)

func TestEventsShard(t *testing.T) {
	t.Run("SameAsFNV1a32", func(t *testing.T) {
		for _, app := range []string{"", "a", "demo", "app-0190f0a8", "ünïcode"} {
			h := fnv.New32a()
			h.Write([]byte(app))
			for _, k := range []int{2, 3, 7, 16} {
				if got, want := wire.EventsShard(app, k), int(h.Sum32()%uint32(k)); got != want {
					t.Fatalf("EventsShard(%q, %d) = %d, want %d", app, k, got, want)
				}
			}
		}
	})
	t.Run("OneShard", func(t *testing.T) {
		for _, k := range []int{-1, 0, 1} {
			if got := wire.EventsShard("demo", k); got != 0 {
				t.Fatalf("EventsShard(demo, %d) = %d, want 0", k, got)
			}
		}
	})
	t.Run("Spread", func(t *testing.T) {
		// 1,000 app ids over 4 shards: none far from a quarter.
		var n [4]int
		for i := range 1000 {
			n[wire.EventsShard(fmt.Sprintf("app-%d", i), 4)]++
		}
		for s, c := range n {
			if c < 200 || c > 300 {
				t.Fatalf("shard %d got %d of 1000 apps (%v), want about 250", s, c, n)
			}
		}
	})
}

// TestQueueShard: every queue EventsQueues names reads back as its shard,
// and the single queue of an unsharded deployment as 0.
func TestQueueShard(t *testing.T) {
	for _, n := range []int{1, 2, 11} {
		for i, q := range wire.EventsQueues("/queue/threatview.events", n) {
			if k, err := wire.QueueShard(q); k != i || err != nil {
				t.Errorf("QueueShard(%q) = %d, %v; want %d", q, k, err, i)
			}
		}
	}
	if _, err := wire.QueueShard("/queue/threatview.events.32768"); err == nil {
		t.Error("QueueShard of shard 32768: no error, want one (past a smallint)")
	}
}
