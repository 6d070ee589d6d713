package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/processor/internal/pgtest"
)

// TestProcess_ShardsByApp routes events as the collector does with two
// shards (wire.EventsShard of the app id picks the queue, <base>.<i>; a
// message carries several apps of one shard, as coalesced requests do) to
// two processors on one events DB, client re-sends (same id, later
// received_at) included. Each processor stores exactly its shard's apps'
// events, each id once, and every rollup is exact.
func TestProcess_ShardsByApp(t *testing.T) {
	s := newStack(t)
	const k = 2
	base := testenv.Queue("events")
	queues := [k]string{base + ".0", base + ".1"}
	var procs [k]*proc
	for i := range procs {
		procs[i] = startProc(t, s.env(freeAddr(t), "PROCESSOR_QUEUE", queues[i], "PROCESSOR_BATCH_MAX_WAIT", "20ms"))
	}
	for _, p := range procs {
		waitFor(t, 30*time.Second, "both shards' processors ready", func() bool {
			return status("http://"+p.addr+"/readyz") == http.StatusOK
		})
	}
	apps := make([]string, 8)
	var byShard [k][]string
	for i := range apps {
		apps[i] = fmt.Sprintf("%s-%d", testenv.Name("app"), i)
		sh := wire.EventsShard(apps[i], k)
		byShard[sh] = append(byShard[sh], apps[i])
	}
	for sh, a := range byShard {
		if len(a) == 0 {
			t.Fatalf("no app on shard %d of %v: pick other names", sh, apps)
		}
	}

	r := rand.New(rand.NewPCG(38, 2))
	now := time.Now().UTC()
	var want [k]int
	const messages, perMessage = 20, 20
	for m := range messages {
		for sh, shardApps := range byShard {
			batch := make([]wire.Event, 0, perMessage+perMessage/4)
			for range perMessage {
				e := pgtest.Event(r, now, 2*time.Hour)
				e.App.ID = shardApps[r.IntN(len(shardApps))]
				batch = append(batch, e)
			}
			want[sh] += perMessage
			// A quarter of them sent again by their client in the next
			// message of the same shard (an app's re-send meets its own writer).
			again := make([]wire.Event, perMessage/4)
			for j := range again {
				again[j] = batch[j]
				again[j].ReceivedAt = batch[j].ReceivedAt.Add(time.Duration(1+m) * time.Second)
			}
			for _, b := range [][]wire.Event{batch, again} {
				if err := s.pub.Send(context.Background(), queues[sh], pgtest.Body(t, b...), nil); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
		}
	}
	unique := want[0] + want[1]
	waitFor(t, 90*time.Second, "every event stored", func() bool {
		return pgtest.Count(t, s.pool, "SELECT count(*) FROM events.events") >= unique &&
			metric(procs[0].addr, "processor_events_stored_total") == float64(want[0]) &&
			metric(procs[1].addr, "processor_events_stored_total") == float64(want[1])
	})
	for sh, p := range procs {
		if got := metric(p.addr, "processor_events_stored_total"); got != float64(want[sh]) {
			t.Errorf("shard %d's processor stored %v events, want %d (its apps' alone)", sh, got, want[sh])
		}
	}
	if n := pgtest.Count(t, s.pool, "SELECT count(*) - count(DISTINCT (id, app_id)) FROM events.events"); n != 0 {
		t.Fatalf("%d ids stored twice", n)
	}
	assertExact(t, s, unique)
}
