package auditlogger_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/platform/mq"
	"threatview/platform/pipeline"
	"threatview/platform/wire"
)

type fakeStore struct {
	mu      sync.Mutex
	records []wire.AuditRecord
}

func (s *fakeStore) Insert(_ context.Context, records []wire.AuditRecord) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, records...)
	return len(records), nil
}

type sent struct {
	body   string
	reason string
}

type fakeDLQ struct {
	mu   sync.Mutex
	msgs []sent
}

func (q *fakeDLQ) Send(_ context.Context, _ string, body []byte, headers map[string]string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, sent{string(body), headers[wire.HeaderDeadLetterReason]})
	return nil
}

func record(t *testing.T, id string, outcome int) string {
	b, err := json.Marshal(wire.AuditRecord{ID: id, Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Action: "events.collect", Outcome: outcome, ActorApp: "app-" + id[:4]})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWorkerHandler_BadRecordIsolated: a message carrying the audit records of
// several requests, one of them bad, loses only that record to the
// dead-letter queue (alone, with its reason); the others are stored.
// (Before, the whole message was dead-lettered.)
func TestWorkerHandler_BadRecordIsolated(t *testing.T) {
	store, dlq := &fakeStore{}, &fakeDLQ{}
	c := pipeline.NewConsumer(auditlogger.WorkerHandler(store), dlq, pipeline.Config{Queue: "/queue/audit-test",
		MaxItems: 100, MaxMessages: 10, MaxWait: time.Millisecond, PartName: "record", Metrics: auditlogger.WorkerMetrics(nil)},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	good1 := record(t, "0193a4c2-7e1f-7c3a-9b2d-5e6f7a8b9c01", 202)
	bad := record(t, "0193a4c2-7e1f-7c3a-9b2d-5e6f7a8b9c02", 0)
	good2 := record(t, "0193a4c2-7e1f-7c3a-9b2d-5e6f7a8b9c03", 202)
	in := make(chan *mq.Delivery, 3)
	in <- &mq.Delivery{Body: []byte(`{"v":1,"records":[` + good1 + `,` + bad + `,` + good2 + `]}`)}
	in <- &mq.Delivery{Body: []byte(`{"v":1,"records":[` + bad + `]}`)}
	in <- &mq.Delivery{Body: []byte(`{"v":1,"records":[{"id":`)}
	close(in)
	if err := c.Run(context.Background(), in); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(store.records) != 2 || store.records[0].ID[34:] != "01" || store.records[1].ID[34:] != "03" {
		t.Fatalf("stored %+v, want the two good records", store.records)
	}
	want := []string{`{"v":1,"records":[` + bad + `]}`, `{"v":1,"records":[` + bad + `]}`, `{"v":1,"records":[{"id":`}
	if len(dlq.msgs) != len(want) {
		t.Fatalf("dead letters = %+v, want %d", dlq.msgs, len(want))
	}
	for i, w := range want {
		if dlq.msgs[i].body != w {
			t.Errorf("dead letter %d = %s, want %s", i, dlq.msgs[i].body, w)
		}
		if !strings.Contains(dlq.msgs[i].reason, "invalid envelope") {
			t.Errorf("dead letter %d reason = %q", i, dlq.msgs[i].reason)
		}
	}
}
