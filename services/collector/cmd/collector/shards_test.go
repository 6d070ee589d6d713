package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"threatview/collector/publish"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// TestRun_Shards runs the collector with COLLECTOR_SHARDS=2 against the
// real broker: requests of six apps (three on each shard), sent at once,
// arrive on the two shard queues, each app's events all on the queue
// wire.EventsShard names and nowhere else, none on the unsharded queue; the
// collector reports each shard queue's depth.
func TestRun_Shards(t *testing.T) {
	s := mustStack(t)
	const k, appsPerShard, requests = 2, 3, 4
	queues := publish.ShardQueues(s.queue, k)
	var apps []string
	var per [k]int
	for len(apps) < k*appsPerShard {
		app := testenv.Name("app")
		if sh := wire.EventsShard(app, k); per[sh] < appsPerShard {
			per[sh]++
			apps = append(apps, app)
		}
	}
	base := startCollector(t, s.env(map[string]string{
		"COLLECTOR_SHARDS":                "2",
		"COLLECTOR_BROKER_STATS_INTERVAL": "300ms",
	}))
	tokens := make([]string, len(apps))
	for i, app := range apps {
		tokens[i] = s.newToken(t, app)
	}

	var mu sync.Mutex
	want := map[string]string{} // event id -> app
	var wg sync.WaitGroup
	for i, app := range apps {
		for range requests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := postEvents(t, base, tokens[i], `{"events":[`+event(app, "")+`,`+event(app, "")+`]}`, nil)
				if r.status != http.StatusAccepted {
					t.Errorf("%s: %d %s", app, r.status, r.body)
					return
				}
				ids := r.ids(t)
				mu.Lock()
				for _, id := range ids {
					want[id] = app
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Before anything is consumed: each shard queue's depth, as the
	// collector exports it, counts its messages.
	for _, q := range queues {
		name := fmt.Sprintf(`broker_queue_size{queue=%q}`, q[len("/queue/"):])
		waitUntil(t, 10*time.Second, name+" > 0", func() bool { return metric(t, base, name) > 0 })
	}

	seen := map[string]int{} // app -> shard its events arrived on
	got := 0
	for sh, q := range queues {
		for _, b := range consume(t, s.broker, q, per[sh]*requests*2) {
			for _, ev := range b.Events {
				app, ok := want[ev.ID]
				if !ok || app != ev.App.ID {
					t.Fatalf("event %s of %s on %s: not one of the accepted (%q)", ev.ID, ev.App.ID, q, app)
				}
				if prev, ok := seen[app]; ok && prev != sh {
					t.Fatalf("%s's events on shards %d and %d, want one", app, prev, sh)
				}
				if w := wire.EventsShard(app, k); w != sh {
					t.Fatalf("%s's events on shard %d, want %d (wire.EventsShard)", app, sh, w)
				}
				seen[app] = sh
				got++
			}
		}
	}
	if got != len(want) || len(seen) != len(apps) {
		t.Fatalf("%d events of %d apps arrived, want %d of %d", got, len(seen), len(want), len(apps))
	}
	if stray := drainQueue(t, s.broker, s.queue, 500*time.Millisecond); len(stray) != 0 {
		t.Fatalf("%d messages on the unsharded queue %s, want none", len(stray), s.queue)
	}
}

// waitUntil polls cond every 50 ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
	}
}
