package charts

import (
	"fmt"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"threatview/collector/publish"
	"threatview/platform/wire"
)

// TestChart_Shards: with shards: 2 the chart runs one data-processor
// Deployment per shard queue, each pinned to one replica, with selectors
// that do not overlap and PROCESSOR_QUEUE the collector's own name for that
// shard (publish.ShardQueues), and tells the collectors COLLECTOR_SHARDS=2.
// With the default (1) nothing changes: one data-processor on the single
// queue.
func TestChart_Shards(t *testing.T) {
	t.Run("Two", func(t *testing.T) {
		r := render(t, map[string]any{"shards": 2})
		if _, ok := r.find("Deployment", release+"-threatview-data-processor"); ok {
			t.Fatalf("the unsharded data-processor Deployment is still rendered beside the shards")
		}
		queues := publish.ShardQueues(wire.EventsQueue, 2)
		var ds []*appsv1.Deployment
		for i, want := range queues {
			d := r.deployment(t, fmt.Sprintf("data-processor-%d", i))
			ds = append(ds, d)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				t.Errorf("shard %d: replicas %v, strategy %q; want exactly 1, Recreate (one leader per queue)", i, d.Spec.Replicas, d.Spec.Strategy.Type)
			}
			if got := containerEnv(t, r, d.Spec.Template.Spec.Containers[0])["PROCESSOR_QUEUE"]; got != want {
				t.Errorf("shard %d: PROCESSOR_QUEUE = %q, want %q", i, got, want)
			}
		}
		for i, d := range ds {
			for j, other := range ds {
				if i != j && subset(d.Spec.Selector.MatchLabels, other.Spec.Template.Labels) {
					t.Errorf("shard %d's selector %v also selects shard %d's pods", i, d.Spec.Selector.MatchLabels, j)
				}
			}
		}
		// One Service (and its ServiceMonitor endpoints) over every shard's pods.
		m, ok := r.find("Service", release+"-threatview-data-processor")
		if !ok {
			t.Fatal("no data-processor Service")
		}
		for i, d := range ds {
			if sel := m.obj.(*corev1.Service).Spec.Selector; !subset(sel, d.Spec.Template.Labels) {
				t.Errorf("the data-processor Service %v does not select shard %d's pods", sel, i)
			}
		}
		col := r.deployment(t, "data-collector")
		if got := containerEnv(t, r, col.Spec.Template.Spec.Containers[0])["COLLECTOR_SHARDS"]; got != "2" {
			t.Errorf("collector COLLECTOR_SHARDS = %q, want 2", got)
		}
		// The status and DLQ pages list each shard's queue.
		if got := containerEnv(t, r, r.deployment(t, "admin-interface").Spec.Template.Spec.Containers[0])["ADMINUI_EVENTS_SHARDS"]; got != "2" {
			t.Errorf("admin interface ADMINUI_EVENTS_SHARDS = %q, want 2", got)
		}
		checkWorkloads(t, r)
	})
	t.Run("Alerts", func(t *testing.T) {
		r := render(t, map[string]any{"shards": 2, "prometheusRule": map[string]any{"enabled": true}})
		m, ok := r.find("PrometheusRule", release+"-threatview")
		if !ok {
			t.Fatal("no PrometheusRule rendered with prometheusRule.enabled")
		}
		exprs := map[string]string{}
		for _, g := range m.obj.(*monitoringv1.PrometheusRule).Spec.Groups {
			for _, a := range g.Rules {
				exprs[a.Alert] = a.Expr.String()
			}
		}
		if e := exprs["ThreatViewConsumerNotLeading"]; !strings.Contains(e, "sum(processor_leader") || !strings.Contains(e, "< 2") {
			t.Errorf("ThreatViewConsumerNotLeading = %q, want a leader asked of each of the 2 shards", e)
		}
		// The backlog alert sees every shard queue's depth, not only the
		// unsharded queue's.
		expr, err := promql.ParseExpr(exprs["ThreatViewEventsBacklog"])
		if err != nil {
			t.Fatalf("ThreatViewEventsBacklog: %v", err)
		}
		matchers := 0
		for _, sel := range parser.ExtractSelectors(expr) {
			for _, lm := range sel {
				if lm.Name != "queue" {
					continue
				}
				matchers++
				for _, q := range append(publish.ShardQueues(wire.EventsQueue, 2), wire.EventsQueue) {
					if name := strings.TrimPrefix(q, "/queue/"); !lm.Matches(name) {
						t.Errorf("ThreatViewEventsBacklog's %s does not match queue %s", lm, name)
					}
				}
				if lm.Matches("threatview.audit") || lm.Matches("DLQ.threatview.events.0") {
					t.Errorf("ThreatViewEventsBacklog's %s matches other queues", lm)
				}
			}
		}
		if matchers == 0 {
			t.Errorf("ThreatViewEventsBacklog = %q: no queue matcher", exprs["ThreatViewEventsBacklog"])
		}
	})
	t.Run("Default", func(t *testing.T) {
		r := render(t, nil)
		d := r.deployment(t, "data-processor")
		env := containerEnv(t, r, d.Spec.Template.Spec.Containers[0])
		if q, set := env["PROCESSOR_QUEUE"]; set {
			t.Errorf("data-processor PROCESSOR_QUEUE = %q, want unset (the single queue, its default)", q)
		}
		if got := containerEnv(t, r, r.deployment(t, "data-collector").Spec.Template.Spec.Containers[0])["COLLECTOR_SHARDS"]; got != "1" {
			t.Errorf("collector COLLECTOR_SHARDS = %q, want 1", got)
		}
		for _, m := range r.objects {
			if m.kind == "Deployment" && strings.HasPrefix(m.name, release+"-threatview-data-processor-") {
				t.Errorf("Deployment %s rendered with one shard", m.name)
			}
		}
	})
	t.Run("Drain", func(t *testing.T) {
		// From 1 shard to 2: the old single queue keeps a processor of its
		// own until it is empty, beside the two shards'.
		r := render(t, map[string]any{"shards": 2, "drainQueues": []any{wire.EventsQueue}})
		queues := map[string]string{}
		for _, m := range r.objects {
			if d, ok := m.obj.(*appsv1.Deployment); ok && strings.HasPrefix(m.name, release+"-threatview-data-processor") {
				queues[m.name] = containerEnv(t, r, d.Spec.Template.Spec.Containers[0])["PROCESSOR_QUEUE"]
			}
		}
		want := map[string]string{
			release + "-threatview-data-processor-0":       wire.EventsQueue + ".0",
			release + "-threatview-data-processor-1":       wire.EventsQueue + ".1",
			release + "-threatview-data-processor-drain-0": wire.EventsQueue,
		}
		if fmt.Sprint(queues) != fmt.Sprint(want) {
			t.Fatalf("processors and their queues = %v, want %v", queues, want)
		}
		checkWorkloads(t, r)
	})
	t.Run("SchemaRejects", func(t *testing.T) {
		c := loadChart(t)
		for _, v := range []map[string]any{
			{"shards": 0}, {"shards": 65}, {"shards": "two"},
			{"drainQueues": []any{"threatview.events"}}, {"drainQueues": []any{"/queue/threatview.audit"}},
		} {
			if _, err := renderValues(c, v); err == nil || !strings.Contains(err.Error(), "schema") {
				t.Errorf("%v rendered (%v), want a schema violation", v, err)
			}
		}
	})
}
