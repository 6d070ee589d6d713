package publish_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/collector/publish"
	"threatview/platform/wire"
)

func TestShardQueues(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{1, []string{"/queue/threatview.events"}},
		{2, []string{"/queue/threatview.events.0", "/queue/threatview.events.1"}},
		{3, []string{"/queue/threatview.events.0", "/queue/threatview.events.1", "/queue/threatview.events.2"}},
	} {
		if got := publish.ShardQueues(wire.EventsQueue, tc.n); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("ShardQueues(%q, %d) = %v, want %v", wire.EventsQueue, tc.n, got, tc.want)
		}
	}
}

// Each app's requests go to its shard's group alone, and requests of
// several apps of one shard still share a message.
func TestShards_For(t *testing.T) {
	const k = 3
	var mu sync.Mutex
	sent := make([][]string, k) // per shard, the messages' bodies
	groups := make([]*publish.Group, k)
	for i := range groups {
		groups[i] = publish.New(publish.Options{Prefix: "[", Suffix: "]", Window: 30 * time.Millisecond},
			func(_ context.Context, b []byte, _ int) error {
				mu.Lock()
				defer mu.Unlock()
				sent[i] = append(sent[i], string(b))
				return nil
			})
	}
	s := publish.NewShards(groups...)
	apps := make([]string, 12)
	var tickets []publish.Ticket
	for a := range apps {
		apps[a] = fmt.Sprintf("app-%d", a)
		tickets = append(tickets, s.For(apps[a]).Add([]byte(`"`+apps[a]+`"`), 1))
	}
	for _, tk := range tickets {
		if err := tk.Wait(); err != nil {
			t.Fatalf("Wait = %v", err)
		}
	}
	s.Flush()
	perShard := make([]int, k)
	for _, app := range apps {
		perShard[wire.EventsShard(app, k)]++
	}
	for i, msgs := range sent {
		found := 0
		for _, m := range msgs {
			for _, app := range apps {
				if strings.Contains(m, `"`+app+`"`) {
					if got := wire.EventsShard(app, k); got != i {
						t.Fatalf("%s (shard %d) sent with shard %d's group: %s", app, got, i, m)
					}
					found++
				}
			}
		}
		if found != perShard[i] {
			t.Fatalf("shard %d sent %d apps' requests, want %d (%v)", i, found, perShard[i], msgs)
		}
		if perShard[i] > 1 && len(msgs) >= perShard[i] {
			t.Fatalf("shard %d: %d requests in %d messages, want them coalesced", i, perShard[i], len(msgs))
		}
	}
}
