package mq_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/platform/mq"
	"threatview/platform/testenv"
)

// The stack's broker runs the statistics plugin (deploy/activemq/activemq.xml):
// a fresh queue with three messages reads as three, and the store's limit is
// the configured storeUsage.
func TestStatsReader_ReadsQueueDepthAndStore(t *testing.T) {
	cfg := testenv.MustBroker(t)
	queue := testenv.Queue("mqstats")
	pub := mq.NewPublisher(cfg, discard())
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if err := pub.Send(ctx, queue, []byte(`{"n":1}`), nil); err != nil {
			t.Fatalf("Send = %v", err)
		}
	}
	r := mq.NewStatsReader(cfg, queue, discard())
	defer r.Close()
	s, err := r.Read(ctx)
	if err != nil {
		t.Fatalf("Read = %v", err)
	}
	if s.QueueSize != 3 || s.Enqueued != 3 || s.Dequeued != 0 {
		t.Errorf("queue size %v, enqueued %v, dequeued %v; want 3, 3, 0", s.QueueSize, s.Enqueued, s.Dequeued)
	}
	if s.StoreLimit <= 0 || s.StoreBytes <= 0 || s.StorePercent < 0 || s.StorePercent > 100 {
		t.Errorf("store %v of %v bytes (%v%%): not a reading", s.StoreBytes, s.StoreLimit, s.StorePercent)
	}

	// The exporter turns a reading into the broker_* gauges.
	reg := prometheus.NewRegistry()
	ectx, ecancel := context.WithCancel(ctx)
	e := mq.NewStatsExporter(mq.NewStatsReader(cfg, queue, discard()), time.Hour, reg, discard())
	done := make(chan struct{})
	go func() { e.Run(ectx); close(done) }()
	testenv.MustPing(t, 20*time.Second, "broker_stats_up", func() error {
		if testutil.ToFloat64(collectorFor(t, reg, "broker_stats_up")) != 1 {
			return context.DeadlineExceeded
		}
		return nil
	})
	ecancel()
	<-done
	if got := testutil.ToFloat64(collectorFor(t, reg, "broker_queue_size")); got != 3 {
		t.Errorf("broker_queue_size = %v, want 3", got)
	}
}

// collectorFor returns the registered gauge called name.
func collectorFor(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: "copy"}, func() float64 { return mf.Metric[0].GetGauge().GetValue() })
		}
	}
	t.Fatalf("%s not registered", name)
	return nil
}
