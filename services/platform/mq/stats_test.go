package mq

import (
	"testing"
	"time"
)

func TestParseMapXML_StatisticsAnswer(t *testing.T) {
	// The broker's jms-map-xml form of a statistics MapMessage (ActiveMQ 5.17, XStream).
	body := []byte(`<map>
  <entry>
    <string>size</string>
    <long>42</long>
  </entry>
  <entry>
    <string>brokerName</string>
    <string>threatview</string>
  </entry>
  <entry>
    <string>storePercentUsage</string>
    <int>7</int>
  </entry>
  <entry>
    <string>averageEnqueueTime</string>
    <double>1.5</double>
  </entry>
</map>`)
	m, err := parseMapXML(body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"size": 42, "storePercentUsage": 7, "averageEnqueueTime": 1.5}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, m[k], v, m)
		}
	}
	if _, ok := m["brokerName"]; ok {
		t.Errorf("a text entry was read as a number: %v", m)
	}
	if _, err := parseMapXML([]byte(`<map></map>`)); err == nil {
		t.Error("an answer without numbers was accepted")
	}
	if _, err := parseMapXML([]byte(`not xml`)); err == nil {
		t.Error("a body that is not XML was accepted")
	}
}

func TestStatsExporter_OldestMessageAge(t *testing.T) {
	e := &StatsExporter{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		now          int
		size, enq, d float64
		want         int
	}{
		{0, 0, 0, 0, 0},      // empty
		{15, 10, 10, 0, 0},   // 10 arrived since: the oldest came by now
		{30, 30, 30, 0, 15},  // consumer down: the oldest is from t=15
		{45, 50, 50, 0, 30},  // still growing
		{60, 35, 60, 25, 30}, // consumer back, took the first 25: message 26 arrived by t=30
		{75, 10, 60, 50, 15}, // message 51 arrived by t=60
		{90, 0, 60, 60, 0},   // drained
		{105, 5, 5, 0, 0},    // the broker restarted: counters back at 0
		{120, 5, 5, 0, 15},   // nothing moved: the oldest is from t=105
	}
	for i, s := range steps {
		got := e.observe(at(s.now), BrokerStats{QueueSize: s.size, Enqueued: s.enq, Dequeued: s.d})
		if got != time.Duration(s.want)*time.Second {
			t.Errorf("step %d (t=%d size=%v enq=%v deq=%v): oldest %s, want %ds", i, s.now, s.size, s.enq, s.d, got, s.want)
		}
	}
	// A broker restarted with a backlog recovered from its store: the
	// counters are 0 but the queue is not empty.
	e = &StatsExporter{}
	if got := e.observe(at(0), BrokerStats{QueueSize: 100}); got != 0 {
		t.Errorf("first look at a backlog: %s, want 0", got)
	}
	if got := e.observe(at(30), BrokerStats{QueueSize: 80, Dequeued: 20}); got != 30*time.Second {
		t.Errorf("recovered backlog 30 s later: %s, want 30s", got)
	}
}
