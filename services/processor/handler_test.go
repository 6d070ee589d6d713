package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/platform/mq"
	"threatview/platform/pipeline"
	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/processor"
	"threatview/processor/internal/pgtest"
	"threatview/processor/postgres"
)

// harness is a consumer on a fresh queue and a fresh events DB.
type harness struct {
	queue   string
	broker  mq.Config
	pub     *mq.Publisher
	store   *postgres.Store
	pool    *pgxpool.Pool
	metrics *processor.Metrics
	log     *slog.Logger
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	url, pool := pgtest.MustEventsDB(t)
	store, err := postgres.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(store.Close)
	h := &harness{
		queue:   testenv.Queue("events"),
		broker:  testenv.MustBroker(t),
		store:   store,
		pool:    pool,
		metrics: processor.NewMetrics(prometheus.NewRegistry()),
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	h.pub = mq.NewPublisher(h.broker, h.log)
	t.Cleanup(func() { h.pub.Close() })
	return h
}

// start runs the consumer until the test ends.
func (h *harness) start(t *testing.T, maxEvents int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	subCtx, cancelSub := context.WithCancel(context.Background())
	sub := mq.Subscribe(subCtx, h.broker, h.queue, 500, h.log)
	c := newConsumer(h.store, h.pub, h.queue, maxEvents, 5*time.Millisecond, h.metrics, h.log)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, sub.C()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		cancelSub()
		<-sub.Done()
	})
}

// newConsumer is the processor's consumer as cmd/processor wires it.
func newConsumer(store processor.Store, pub mq.Sender, queue string, maxEvents int, maxWait time.Duration,
	m *processor.Metrics, log *slog.Logger) *pipeline.Consumer[wire.Event] {
	return pipeline.NewConsumer(processor.Handler(store), pub, pipeline.Config{Queue: queue, MaxItems: maxEvents,
		MaxWait: maxWait, PartName: "request", Metrics: m.Pipeline()}, log)
}

func (h *harness) send(t *testing.T, body []byte) {
	t.Helper()
	if err := h.pub.Send(context.Background(), h.queue, body, nil); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// handled is how many events the consumer has finished with.
func (h *harness) handled() int {
	return int(testutil.ToFloat64(h.metrics.EventsStored) + testutil.ToFloat64(h.metrics.Duplicates))
}

func (h *harness) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	return pgtest.Count(t, h.pool, q, args...)
}

func TestConsumer_SameMessageTwice(t *testing.T) {
	h := newHarness(t)
	h.start(t, 100)
	r := rand.New(rand.NewPCG(1, 1))
	now := time.Now().UTC()
	body := pgtest.Body(t, pgtest.Event(r, now, 0), pgtest.Event(r, now, 0), pgtest.Event(r, now, 0))
	h.send(t, body)
	h.send(t, body)
	waitFor(t, "both messages", func() bool { return h.handled() == 6 })
	if got := h.count(t, "SELECT count(*) FROM events.events"); got != 3 {
		t.Fatalf("events stored = %d, want 3", got)
	}
	if got := h.count(t, "SELECT count(*) FROM facts.facts"); got != 3 {
		t.Fatalf("facts = %d, want 3", got)
	}
	if got := testutil.ToFloat64(h.metrics.Duplicates); got != 3 {
		t.Fatalf("duplicates metric = %v, want 3", got)
	}
}

func TestConsumer_SameEventIDTwice(t *testing.T) {
	h := newHarness(t)
	h.start(t, 100)
	r := rand.New(rand.NewPCG(2, 2))
	now := time.Now().UTC()
	first := pgtest.Event(r, now, time.Minute)
	again := first
	again.ReceivedAt = now.Add(time.Second) // the collector's clock at the re-send
	again.RequestID = pgtest.UUID(r)
	h.send(t, pgtest.Body(t, first))
	waitFor(t, "the first message", func() bool { return h.handled() == 1 })
	h.send(t, pgtest.Body(t, again, pgtest.Event(r, now, 0)))
	waitFor(t, "the second message", func() bool { return h.handled() == 3 })
	if got := h.count(t, "SELECT count(*) FROM events.events WHERE id = $1", first.ID); got != 1 {
		t.Fatalf("rows for re-sent id = %d, want 1", got)
	}
	if got := h.count(t, "SELECT count(*) FROM facts.facts"); got != 2 {
		t.Fatalf("facts = %d, want 2", got)
	}
}

func TestConsumer_PoisonToDeadLetter(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dlq := mq.Subscribe(ctx, h.broker, wire.DeadLetter(h.queue), 10, h.log)
	h.start(t, 100)
	r := rand.New(rand.NewPCG(3, 3))
	nul := pgtest.Event(r, time.Now(), 0)
	nul.Device.Model = "bad\x00model"
	poisons := []struct {
		body   []byte
		reason string
	}{
		{[]byte(`{"v":1,"events":[{"id":`), "decode"},
		{[]byte(`{"v":99,"events":[]}`), "version"},
		{pgtest.Body(t, nul), "NUL"},
	}
	for _, p := range poisons {
		h.send(t, p.body)
	}
	good := pgtest.Event(r, time.Now().UTC(), 0)
	h.send(t, pgtest.Body(t, good))
	waitFor(t, "the good message", func() bool {
		return h.count(t, "SELECT count(*) FROM events.events WHERE id = $1", good.ID) == 1
	})
	for i, p := range poisons {
		select {
		case d := <-dlq.C():
			if string(d.Body) != string(p.body) {
				t.Errorf("dead letter %d body = %q, want %q", i, d.Body, p.body)
			}
			if reason := d.Header(wire.HeaderDeadLetterReason); !strings.Contains(reason, p.reason) {
				t.Errorf("dead letter %d reason = %q, want it to mention %q", i, reason, p.reason)
			}
			if err := d.Ack(); err != nil {
				t.Errorf("ack dead letter: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("dead letter %d never arrived", i)
		}
	}
	if got := testutil.ToFloat64(h.metrics.DeadLettered); got != 3 {
		t.Fatalf("dead-lettered metric = %v, want 3", got)
	}
	if got := h.count(t, "SELECT count(*) FROM events.events"); got != 1 {
		t.Fatalf("events stored = %d, want only the good one", got)
	}
}

// TestConsumer_RandomEventsRollupsExact sends thousands of random events,
// some messages twice and some ids again in later messages, with events up
// to days late, and checks every rollup against count(*) over the events.
func TestConsumer_RandomEventsRollupsExact(t *testing.T) {
	h := newHarness(t)
	h.start(t, 400)
	r := rand.New(rand.NewPCG(4, 4))
	now := time.Now().UTC()
	unique := map[string]bool{}
	var sent []wire.Event
	messages, events := 0, 0
	for i := 0; i < 150; i++ {
		received := now.Add(-time.Duration(r.Int64N(int64(3 * time.Hour))))
		batch := make([]wire.Event, r.IntN(40)+1)
		for j := range batch {
			spread := time.Duration(r.Int64N(int64(30 * time.Hour)))
			if r.IntN(10) == 0 {
				spread = time.Duration(r.Int64N(int64(45 * 24 * time.Hour)))
			}
			batch[j] = pgtest.Event(r, received, spread)
			if len(sent) > 0 && r.IntN(10) == 0 {
				batch[j] = sent[r.IntN(len(sent))]
				batch[j].ReceivedAt = received
			}
			unique[batch[j].ID] = true
		}
		sent = append(sent, batch...)
		body := pgtest.Body(t, batch...)
		copies := 1
		if r.IntN(6) == 0 {
			copies = 2
		}
		for range copies {
			h.send(t, body)
			messages++
			events += len(batch)
		}
	}
	waitFor(t, fmt.Sprintf("%d messages", messages), func() bool { return h.handled() == events })
	t.Logf("%d messages, %d events, %d unique", messages, events, len(unique))
	if got := h.count(t, "SELECT count(*) FROM events.events"); got != len(unique) {
		t.Fatalf("events stored = %d, want %d", got, len(unique))
	}
	pgtest.AssertRollupsExact(t, h.pool, len(unique))
}

// refusingStore stands in for Postgres refusing one event's data (SQLSTATE
// class 22) that CheckStorable did not foresee; everything else reaches
// the real store.
type refusingStore struct {
	inner processor.Store
	bad   map[string]bool
}

func (s refusingStore) WriteBatch(ctx context.Context, events []wire.Event) (processor.WriteResult, error) {
	for _, e := range events {
		if s.bad[e.ID] {
			return processor.WriteResult{}, fmt.Errorf("write batch: %w: invalid input syntax for type json", processor.ErrUnstorable)
		}
	}
	return s.inner.WriteBatch(ctx, events)
}

func (s refusingStore) WriteRequests(ctx context.Context, requests [][]wire.Event) (processor.WriteResult, map[int]error, error) {
	refused := map[int]error{}
	var rest [][]wire.Event
	for i, req := range requests {
		bad := false
		for _, e := range req {
			bad = bad || s.bad[e.ID]
		}
		if bad {
			refused[i] = fmt.Errorf("request: %w: invalid input syntax for type json", processor.ErrUnstorable)
			continue
		}
		rest = append(rest, req)
	}
	res, _, err := s.inner.WriteRequests(ctx, rest)
	return res, refused, err
}

func TestConsumer_RefusedDataIsIsolated(t *testing.T) {
	h := newHarness(t)
	r := rand.New(rand.NewPCG(5, 5))
	now := time.Now().UTC()
	good1, bad, good2 := pgtest.Event(r, now, 0), pgtest.Event(r, now, 0), pgtest.Event(r, now, 0)
	// All three are queued before the consumer starts, so they share a batch.
	for _, e := range []wire.Event{good1, bad, good2} {
		h.send(t, pgtest.Body(t, e))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dlq := mq.Subscribe(ctx, h.broker, wire.DeadLetter(h.queue), 10, h.log)
	sub := mq.Subscribe(ctx, h.broker, h.queue, 100, h.log)
	c := newConsumer(refusingStore{inner: h.store, bad: map[string]bool{bad.ID: true}}, h.pub,
		h.queue, 100, 200*time.Millisecond, h.metrics, h.log)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, sub.C()) }()

	waitFor(t, "both good events", func() bool {
		return h.count(t, "SELECT count(*) FROM events.events WHERE id IN ($1, $2)", good1.ID, good2.ID) == 2
	})
	select {
	case d := <-dlq.C():
		if string(d.Body) != string(pgtest.Body(t, bad)) {
			t.Errorf("dead letter body = %s, want the refused message", d.Body)
		}
		if reason := d.Header(wire.HeaderDeadLetterReason); !strings.Contains(reason, "cannot be stored") {
			t.Errorf("dead letter reason = %q", reason)
		}
		_ = d.Ack()
	case <-time.After(30 * time.Second):
		t.Fatal("the refused message never reached the dead-letter queue")
	}
	if got := h.count(t, "SELECT count(*) FROM events.events WHERE id = $1", bad.ID); got != 0 {
		t.Fatalf("refused event stored %d times", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// bodyV2 encodes requests as one version-2 message body.
func bodyV2(t *testing.T, requests ...[]wire.Event) []byte {
	t.Helper()
	b := []byte(wire.EventsPrefix)
	for i, req := range requests {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, wire.RequestPrefix...)
		for j := range req {
			if j > 0 {
				b = append(b, ',')
			}
			e, err := json.Marshal(req[j])
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			b = append(b, e...)
		}
		b = append(b, wire.RequestSuffix...)
	}
	return append(b, wire.EventsSuffix...)
}

// request returns n random events sharing one request id.
func request(r *rand.Rand, now time.Time, n int) []wire.Event {
	rid := pgtest.UUID(r)
	events := make([]wire.Event, n)
	for j := range events {
		events[j] = pgtest.Event(r, now, time.Hour)
		events[j].RequestID = rid
	}
	return events
}

// TestConsumer_FallbackAcrossBatches sends messages of mixed sizes (1 to 3
// requests of 1 to 7 events) that fill several batches, with a refused event
// in some requests of later batches, so the request-by-request fallback must
// slice each batch's events by that batch's own requests. Only the refused
// requests go to the dead-letter queue, each alone. (Before the fix the
// per-message counts of earlier batches were kept: good events were acked
// but never stored, or the consumer panicked.)
func TestConsumer_FallbackAcrossBatches(t *testing.T) {
	h := newHarness(t)
	r := rand.New(rand.NewPCG(6, 6))
	now := time.Now().UTC()
	bad := map[string]bool{}
	var good, refused []string
	badBodies := map[string]bool{}
	for i := range 40 {
		reqs := make([][]wire.Event, 1+r.IntN(3))
		for k := range reqs {
			reqs[k] = request(r, now, 1+r.IntN(7))
			if i >= 10 && i%7 == 3 && k == len(reqs)-1 {
				bad[reqs[k][len(reqs[k])/2].ID] = true
				badBodies[string(bodyV2(t, reqs[k]))] = true
				for _, e := range reqs[k] {
					refused = append(refused, e.ID)
				}
				continue
			}
			for _, e := range reqs[k] {
				good = append(good, e.ID)
			}
		}
		h.send(t, bodyV2(t, reqs...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dlq := mq.Subscribe(ctx, h.broker, wire.DeadLetter(h.queue), 100, h.log)
	sub := mq.Subscribe(ctx, h.broker, h.queue, 100, h.log)
	c := newConsumer(refusingStore{inner: h.store, bad: bad}, h.pub, h.queue, 12, 200*time.Millisecond, h.metrics, h.log)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, sub.C()) }()

	for i := range len(badBodies) {
		select {
		case d := <-dlq.C():
			if !badBodies[string(d.Body)] {
				t.Errorf("dead letter %d = %.200s, want one refused request alone", i, d.Body)
			}
			_ = d.Ack()
		case <-time.After(30 * time.Second):
			t.Fatalf("dead letter %d of %d never arrived", i, len(badBodies))
		}
	}
	waitFor(t, "every good event", func() bool {
		return h.count(t, "SELECT count(*) FROM events.events WHERE id = ANY($1::uuid[])", good) == len(good)
	})
	if got := h.count(t, "SELECT count(*) FROM events.events WHERE id = ANY($1::uuid[])", refused); got != 0 {
		t.Fatalf("%d events of refused requests stored, want 0", got)
	}
	if got := h.count(t, "SELECT count(*) FROM events.events"); got != len(good) {
		t.Fatalf("events stored = %d, want the %d good ones", got, len(good))
	}
	if got := testutil.ToFloat64(h.metrics.Isolated.WithLabelValues("refused")); got != float64(len(badBodies)) {
		t.Fatalf("isolated{refused} = %v, want %d", got, len(badBodies))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestConsumer_RequestIsolation sends one message carrying a good app's
// requests around requests that cannot be decoded or stored (a time the
// envelope cannot carry, nesting beyond encoding/json's limit, a NUL): only
// those go to the dead-letter queue, each alone, and every good event is
// stored. (Before, the whole message was dead-lettered.)
func TestConsumer_RequestIsolation(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dlq := mq.Subscribe(ctx, h.broker, wire.DeadLetter(h.queue), 10, h.log)
	h.start(t, 100)
	r := rand.New(rand.NewPCG(7, 7))
	now := time.Now().UTC()
	good1, good2 := request(r, now, 3), request(r, now, 2)
	enc := func(events []wire.Event) string {
		b := bodyV2(t, events)
		return string(b[len(wire.EventsPrefix) : len(b)-len(wire.EventsSuffix)])
	}
	badTime := strings.Replace(enc(request(r, now, 1)), `"occurred_at":"`, `"occurred_at":"-0074-12-01T04:06:49Z","x":"`, 1)
	deepEv := request(r, now, 1)
	deepEv[0].Threats = json.RawMessage(`["X"]`)
	deep := strings.Replace(enc(deepEv), `["X"]`, strings.Repeat("[", 10001)+strings.Repeat("]", 10001), 1)
	nulEv := request(r, now, 2)
	nulEv[1].Device.Model = "a\x00b"
	nul := enc(nulEv)
	body := wire.EventsPrefix + strings.Join([]string{enc(good1), badTime, deep, nul, enc(good2)}, ",") + wire.EventsSuffix
	h.send(t, []byte(body))

	want := map[string]string{
		wire.EventsPrefix + badTime + wire.EventsSuffix: "parsing time",
		wire.EventsPrefix + deep + wire.EventsSuffix:    "max depth",
		wire.EventsPrefix + nul + wire.EventsSuffix:     "NUL",
	}
	for n := len(want); n > 0; n-- {
		select {
		case d := <-dlq.C():
			reason, ok := want[string(d.Body)]
			if !ok {
				t.Errorf("dead letter = %.200s, want one bad request alone", d.Body)
			} else if got := d.Header(wire.HeaderDeadLetterReason); !strings.Contains(got, reason) {
				t.Errorf("dead letter reason = %q, want it to mention %q", got, reason)
			}
			delete(want, string(d.Body))
			_ = d.Ack()
		case <-time.After(30 * time.Second):
			t.Fatalf("dead letters missing: %d", len(want))
		}
	}
	var ids []string
	for _, e := range append(good1, good2...) {
		ids = append(ids, e.ID)
	}
	waitFor(t, "the good events", func() bool {
		return h.count(t, "SELECT count(*) FROM events.events WHERE id = ANY($1::uuid[])", ids) == len(ids)
	})
	if got := h.count(t, "SELECT count(*) FROM events.events"); got != len(ids) {
		t.Fatalf("events stored = %d, want %d", got, len(ids))
	}
	if got := testutil.ToFloat64(h.metrics.Isolated.WithLabelValues("envelope")); got != 2 {
		t.Errorf("isolated{envelope} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(h.metrics.Isolated.WithLabelValues("unstorable")); got != 1 {
		t.Errorf("isolated{unstorable} = %v, want 1", got)
	}
}

// TestConsumer_PostgresRefusesOneRequest: a request whose rows Postgres
// itself refuses (a unique violation from a facts row whose event's
// partition was dropped) shares a message with good requests; it alone is
// dead-lettered and the others are stored.
func TestConsumer_PostgresRefusesOneRequest(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dlq := mq.Subscribe(ctx, h.broker, wire.DeadLetter(h.queue), 10, h.log)
	r := rand.New(rand.NewPCG(8, 8))
	now := time.Now().UTC()
	good1, stale, good2 := request(r, now, 3), request(r, now, 2), request(r, now, 4)
	if _, err := h.store.WriteBatch(ctx, stale[1:]); err != nil {
		t.Fatalf("WriteBatch: %v", err)
	}
	if _, err := h.pool.Exec(ctx, `DELETE FROM events.events WHERE id = $1`, stale[1].ID); err != nil {
		t.Fatalf("delete event: %v", err)
	}
	h.start(t, 100)
	h.send(t, bodyV2(t, good1, stale, good2))

	select {
	case d := <-dlq.C():
		if string(d.Body) != string(bodyV2(t, stale)) {
			t.Errorf("dead letter = %.300s, want the refused request alone", d.Body)
		}
		if reason := d.Header(wire.HeaderDeadLetterReason); !strings.Contains(reason, "23505") {
			t.Errorf("dead letter reason = %q, want the unique violation", reason)
		}
		_ = d.Ack()
	case <-time.After(30 * time.Second):
		t.Fatal("the refused request never reached the dead-letter queue")
	}
	var ids []string
	for _, e := range append(good1, good2...) {
		ids = append(ids, e.ID)
	}
	waitFor(t, "the good requests", func() bool {
		return h.count(t, "SELECT count(*) FROM events.events WHERE id = ANY($1::uuid[])", ids) == len(ids)
	})
	if n := h.count(t, "SELECT count(*) FROM events.events WHERE id = $1", stale[0].ID); n != 0 {
		t.Errorf("the refused request's other event stored %d times", n)
	}
	// The dead letter can arrive before the metric is counted: the consumer
	// counts the isolation once the broker has confirmed the dead letter.
	waitFor(t, "isolated{refused} = 1", func() bool {
		return testutil.ToFloat64(h.metrics.Isolated.WithLabelValues("refused")) == 1
	})
}
