package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// drainQueue returns every message body that arrives on queue within quiet
// of the last one (or of the start).
func drainQueue(t *testing.T, cfg mq.Config, queue string, quiet time.Duration) [][]byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := mq.Subscribe(ctx, cfg, queue, 100, slog.New(slog.DiscardHandler))
	var out [][]byte
	for {
		select {
		case d := <-sub.C():
			out = append(out, d.Body)
			if err := d.Ack(); err != nil {
				t.Fatalf("ack: %v", err)
			}
		case <-time.After(quiet):
			return out
		}
	}
}

// One outcome per request: with the audit logger's HTTP API down, a
// request is either 202 with its events and its 202 audit record both on
// the broker, or 5xx with neither. (Before, it was 503 with the events
// already durable: the client's retry stored them again, unaudited.)
func TestRun_OneOutcomeWhenAuditLoggerIsDown(t *testing.T) {
	s := mustStack(t)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"unavailable","message":"down"}}`, http.StatusServiceUnavailable)
	}))
	defer down.Close()
	auditQueue := testenv.Queue("audit")
	base := startCollector(t, s.env(map[string]string{
		"AUDITLOGGER_SERVICE_URL": down.URL,
		"COLLECTOR_AUDIT_QUEUE":   auditQueue,
	}))
	app := testenv.Name("app")
	token := s.newToken(t, app)

	r := postEvents(t, base, token, `{"events":[`+event(app, "")+`,`+event(app, "")+`]}`, map[string]string{"X-Request-ID": "one-outcome-1"})
	events := drainQueue(t, s.broker, s.queue, 3*time.Second)
	audits := drainQueue(t, s.broker, auditQueue, time.Second)
	stored := 0
	for _, m := range events {
		b, err := wire.DecodeEventBatch(m)
		if err != nil {
			t.Fatalf("events message %s: %v", m, err)
		}
		stored += len(b.Events)
	}
	var records []wire.AuditRecord
	for _, m := range audits {
		b, err := wire.DecodeAuditBatch(m)
		if err != nil {
			t.Fatalf("audit message %s: %v", m, err)
		}
		records = append(records, b.Records...)
	}
	switch {
	case r.status == http.StatusAccepted:
		if stored != 2 || len(records) != 1 || records[0].Outcome != 202 || records[0].RequestID != "one-outcome-1" || records[0].EventCount != 2 {
			t.Fatalf("202 with %d events and audit records %+v, want 2 events and one 202 record", stored, records)
		}
	case r.status >= 500:
		if stored != 0 || len(records) != 0 {
			t.Fatalf("%d with %d events and %d audit records durable, want none", r.status, stored, len(records))
		}
	default:
		t.Fatalf("status = %d %s, want 202 or 5xx", r.status, r.body)
	}
}
