package webui

import (
	"testing"

	"threatview/admininterface/upstream"
	"threatview/platform/wire"
)

// TestDLQQueuesFor: with the collectors sharding events (COLLECTOR_SHARDS,
// issue 38), each shard's queue has its own dead letters, replayed to that
// shard's queue (an app stays on one processor). Before, the DLQ page knew
// only DLQ.threatview.events, so a shard's dead letters could not be seen.
func TestDLQQueuesFor(t *testing.T) {
	one := dlqQueuesFor(wire.EventsQueues(wire.EventsQueue, 1))
	if len(one) != 2 || one[0].Key != "events" || one[0].Name != "DLQ.threatview.events" || one[0].target != wire.EventsQueue ||
		one[1].Key != "audit" || one[1].Dest != wire.DeadLetter(wire.AuditQueue) || one[1].Target != "threatview.audit" {
		t.Fatalf("one shard: %+v", one)
	}
	two := dlqQueuesFor(wire.EventsQueues(wire.EventsQueue, 2))
	if len(two) != 3 {
		t.Fatalf("two shards: %+v", two)
	}
	for i, want := range []dlqQueue{
		{Key: "events-0", Name: "DLQ.threatview.events.0", Dest: "/queue/DLQ.threatview.events.0", Target: "threatview.events.0", target: "/queue/threatview.events.0"},
		{Key: "events-1", Name: "DLQ.threatview.events.1", Dest: "/queue/DLQ.threatview.events.1", Target: "threatview.events.1", target: "/queue/threatview.events.1"},
	} {
		if two[i] != want {
			t.Errorf("shard %d: %+v, want %+v", i, two[i], want)
		}
	}
}

// TestBacklog_PerShard: the status page reads each shard queue's depth and
// oldest message (the collector exports broker_queue_size per queue).
func TestBacklog_PerShard(t *testing.T) {
	metrics := [][]upstream.Sample{{
		{Name: "broker_stats_up", Value: 1},
		{Name: "broker_queue_size", Labels: map[string]string{"queue": "threatview.events.0"}, Value: 3},
		{Name: "broker_queue_size", Labels: map[string]string{"queue": "threatview.events.1"}, Value: 250000},
		{Name: "broker_queue_oldest_message_age_seconds", Labels: map[string]string{"queue": "threatview.events.1"}, Value: 90},
	}}
	rows := backlog(metrics, wire.EventsQueues(wire.EventsQueue, 2))
	got := map[string]backlogRow{}
	for _, r := range rows {
		got[r.Name] = r
	}
	if r := got["Events queue depth (threatview.events.0)"]; r.Value != "3 messages" || r.Warn {
		t.Errorf("shard 0 depth: %+v", r)
	}
	if r := got["Events queue depth (threatview.events.1)"]; r.Value != "250000 messages" || !r.Warn {
		t.Errorf("shard 1 depth: %+v", r)
	}
	if r := got["Oldest message on the events queue (threatview.events.1)"]; r.Value != "1m30s" {
		t.Errorf("shard 1 oldest: %+v", r)
	}
	if _, ok := got["Events queue depth"]; ok {
		t.Errorf("an unsharded row beside the shards: %+v", rows)
	}
	single := backlog(metrics, wire.EventsQueues(wire.EventsQueue, 1))
	if single[0].Name != "Events queue depth" || !single[0].Unknown {
		t.Errorf("unsharded: %+v", single[0])
	}
}
