package main

import (
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// receiptEater is a TCP proxy to the real broker that, while eat is set,
// drops the RECEIPT frames answering a COMMIT: the broker commits, the
// collector never hears of it. That is the unknown outcome. (The receipts
// of the transaction's SENDs pass: without them the collector never sends
// the COMMIT, and the request is a definite 503 unavailable.)
type receiptEater struct {
	ln      net.Listener
	eat     atomic.Bool
	commits sync.Map // receipt ids of COMMIT frames
	wg      sync.WaitGroup
}

func newReceiptEater(t *testing.T, broker string) *receiptEater {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &receiptEater{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", broker)
			if err != nil {
				c.Close()
				continue
			}
			p.wg.Add(2)
			go func() {
				defer p.wg.Done()
				defer b.Close()
				r, w := frame.NewReader(c), frame.NewWriter(b)
				for {
					f, err := r.Read()
					if err != nil {
						return
					}
					if f != nil && f.Command == frame.COMMIT {
						if id, ok := f.Header.Contains(frame.Receipt); ok {
							p.commits.Store(id, true)
						}
					}
					if err := w.Write(f); err != nil {
						return
					}
				}
			}()
			go func() {
				defer p.wg.Done()
				defer c.Close()
				r, w := frame.NewReader(b), frame.NewWriter(c)
				for {
					f, err := r.Read()
					if err != nil {
						return
					}
					if f != nil && f.Command == frame.RECEIPT && p.eat.Load() {
						if _, commit := p.commits.Load(f.Header.Get(frame.ReceiptId)); commit {
							continue
						}
					}
					if err := w.Write(f); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

// A request whose outcome is unknown (the broker committed, the receipt
// never came) is answered 503 outcome_unknown; its retry with the same
// Idempotency-Key carries the same event ids, so the processor, which
// stores an id once per app, stores each event once.
func TestRun_UnknownOutcomeRetryWithIdempotencyKey(t *testing.T) {
	s := mustStack(t)
	proxy := newReceiptEater(t, s.broker.Addr)
	auditQueue := testenv.Queue("audit")
	env := s.env(map[string]string{
		"STOMP_ADDR":                proxy.ln.Addr().String(),
		"STOMP_RECEIPT_TIMEOUT":     "1s",
		"COLLECTOR_PUBLISH_TIMEOUT": "3s",
		"AUDITLOGGER_SERVICE_URL":   "http://127.0.0.1:1",
		"COLLECTOR_AUDIT_QUEUE":     auditQueue,
	})
	base := startCollector(t, env)
	app := testenv.Name("app")
	token := s.newToken(t, app)
	body := `{"events":[` + event(app, "") + `,` + event(app, "") + `]}`
	key := map[string]string{"Idempotency-Key": testenv.Name("order")}

	proxy.eat.Store(true)
	first := postEvents(t, base, token, body, key)
	proxy.eat.Store(false)
	if first.status != http.StatusServiceUnavailable || first.errorCode(t) != "outcome_unknown" {
		t.Fatalf("first attempt = %d %s, want 503 outcome_unknown", first.status, first.body)
	}
	retry := postEvents(t, base, token, body, key).ids(t)

	// The broker kept both attempts; every event of both carries the ids of
	// the 202, so the processor stores two events, not four.
	batches := consume(t, s.broker, s.queue, 4)
	var seen []string
	for _, b := range batches {
		for _, e := range b.Events {
			seen = append(seen, e.ID)
		}
	}
	want := append(append([]string(nil), retry...), retry...)
	sort.Strings(seen)
	sort.Strings(want)
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("event ids on the queue = %v, want each of the 202's ids %v twice", seen, retry)
	}
	// Both attempts were committed with their audit record.
	msgs := drainQueue(t, s.broker, auditQueue, time.Second)
	records := 0
	for _, m := range msgs {
		b, err := wire.DecodeAuditBatch(m)
		if err != nil {
			t.Fatalf("audit message: %v", err)
		}
		records += len(b.Records)
	}
	if records != 2 {
		t.Fatalf("audit records = %d, want 2 (one per committed attempt)", records)
	}
}
