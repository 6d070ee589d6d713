package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"threatview/platform/mq"
	"threatview/platform/pipeline"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

// A test message is a comma-separated list of items, each item its own part;
// an item starting with "bad" is rejected at decoding, one starting with
// "refused" is refused by the store, and a message starting with "!" does not
// decode at all.
func decodeItems(body []byte) ([]pipeline.Part[string], []pipeline.Reject, error) {
	s := string(body)
	if strings.HasPrefix(s, "!") {
		return nil, nil, errors.New("not a list")
	}
	var parts []pipeline.Part[string]
	var rejects []pipeline.Reject
	for _, item := range strings.Split(s, ",") {
		if strings.HasPrefix(item, "bad") {
			rejects = append(rejects, pipeline.Reject{Body: []byte(item), Kind: "bad", Err: errors.New("bad item " + item)})
			continue
		}
		parts = append(parts, pipeline.Part[string]{Items: []string{item}, Body: func() []byte { return []byte(item) }})
	}
	return parts, rejects, nil
}

var errRefused = errors.New("refused for good")

// store is a fake store that fails its first failFirst writes transiently.
type store struct {
	mu        sync.Mutex
	failFirst int
	calls     int
	writes    [][]string // committed batches
	stored    []string
	onWrite   func(call int) // called before each write
}

func (s *store) write(_ context.Context, items []string) (pipeline.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.onWrite != nil {
		s.onWrite(s.calls)
	}
	if s.calls <= s.failFirst {
		return pipeline.Result{}, errTransient
	}
	for _, it := range items {
		if strings.HasPrefix(it, "refused") {
			return pipeline.Result{}, errRefused
		}
	}
	return s.commit(items), nil
}

func (s *store) commit(items []string) pipeline.Result {
	var res pipeline.Result
	for _, it := range items {
		if slices.Contains(s.stored, it) {
			res.Duplicates++
			continue
		}
		s.stored = append(s.stored, it)
		res.Stored++
	}
	s.writes = append(s.writes, slices.Clone(items))
	return res
}

func (s *store) writeParts(_ context.Context, parts [][]string) (pipeline.Result, map[int]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refused := map[int]error{}
	var rest []string
	for i, p := range parts {
		if strings.HasPrefix(p[0], "refused") {
			refused[i] = errRefused
			continue
		}
		rest = append(rest, p...)
	}
	return s.commit(rest), refused, nil
}

func (s *store) handler(isolate bool) pipeline.Handler[string] {
	h := pipeline.Handler[string]{Decode: decodeItems, Write: s.write,
		Permanent: func(err error) bool { return errors.Is(err, errRefused) }}
	if isolate {
		h.WriteParts = s.writeParts
	}
	return h
}

type dead struct{ body, reason string }

type dlq struct {
	mu   sync.Mutex
	msgs []dead
	dest string
}

func (q *dlq) Send(_ context.Context, dest string, body []byte, headers map[string]string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dest = dest
	q.msgs = append(q.msgs, dead{string(body), headers[wire.HeaderDeadLetterReason]})
	return nil
}

func testMetrics() pipeline.Metrics {
	return pipeline.Metrics{
		DeadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: "dead"}),
		Isolated:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "isolated"}, []string{"reason"}),
		Stored:       prometheus.NewCounter(prometheus.CounterOpts{Name: "stored"}),
		Items:        prometheus.NewCounter(prometheus.CounterOpts{Name: "items"}),
		Duplicates:   prometheus.NewCounter(prometheus.CounterOpts{Name: "dups"}),
		WriteErrors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "write_errors"}),
		AckErrors:    prometheus.NewCounter(prometheus.CounterOpts{Name: "ack_errors"}),
	}
}

// feed returns a closed channel holding bodies (their acks fail: no broker).
func feed(bodies ...string) <-chan *mq.Delivery {
	in := make(chan *mq.Delivery, len(bodies))
	for _, b := range bodies {
		in <- &mq.Delivery{Body: []byte(b)}
	}
	close(in)
	return in
}

func TestConsumer_IsolatesAndDeadLetters(t *testing.T) {
	for _, tc := range []struct {
		name      string
		isolate   bool
		stored    []string
		deadBody  []string
		isolatedN float64
	}{
		// WriteParts finds the refused part; the other parts are stored.
		{"OK with WriteParts", true, []string{"a", "b", "c", "e"}, []string{"bad1", "!garbage", "refused-d"}, 1},
		// Without it, every part of the refused batch is dead-lettered.
		{"OK without WriteParts", false, nil, []string{"bad1", "!garbage", "a", "b", "c", "refused-d", "e"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, q, m := &store{}, &dlq{}, testMetrics()
			c := pipeline.NewConsumer(s.handler(tc.isolate), q, pipeline.Config{Queue: "/queue/x", MaxItems: 100,
				MaxWait: 50 * time.Millisecond, Metrics: m}, quiet)
			if err := c.Run(context.Background(), feed("a,bad1,b", "!garbage", "c,refused-d,e")); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if !slices.Equal(s.stored, tc.stored) {
				t.Errorf("stored %v, want %v", s.stored, tc.stored)
			}
			var bodies []string
			for _, d := range q.msgs {
				bodies = append(bodies, d.body)
				if d.reason == "" {
					t.Errorf("dead letter %q has no reason", d.body)
				}
			}
			if !slices.Equal(bodies, tc.deadBody) {
				t.Errorf("dead-lettered %v, want %v", bodies, tc.deadBody)
			}
			if q.dest != wire.DeadLetter("/queue/x") {
				t.Errorf("dead letters went to %s", q.dest)
			}
			if q.msgs[1].reason != "not a list" || q.msgs[0].reason != "bad item bad1" {
				t.Errorf("reasons %q, %q", q.msgs[0].reason, q.msgs[1].reason)
			}
			if got := testutil.ToFloat64(m.DeadLettered); got != float64(len(tc.deadBody)) {
				t.Errorf("DeadLettered = %v", got)
			}
			if got := testutil.ToFloat64(m.Isolated.WithLabelValues("refused")); got != tc.isolatedN {
				t.Errorf("Isolated{refused} = %v, want %v", got, tc.isolatedN)
			}
			if got := testutil.ToFloat64(m.Isolated.WithLabelValues("bad")); got != 1 {
				t.Errorf("Isolated{bad} = %v, want 1", got)
			}
			if got := testutil.ToFloat64(m.Items); got != float64(len(tc.stored)) {
				t.Errorf("Items = %v", got)
			}
			// The three messages were handled together; their acks failed.
			if got := testutil.ToFloat64(m.AckErrors); got != 3 {
				t.Errorf("AckErrors = %v, want 3", got)
			}
		})
	}
}

func TestConsumer_BatchBounds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxItems    int
		maxMessages int
		want        []int
	}{
		{"OK closes at MaxItems", 3, 0, []int{4, 4, 2}},
		{"OK closes at MaxMessages", 100, 3, []int{6, 4}},
		{"OK one batch", 100, 0, []int{10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &store{}
			c := pipeline.NewConsumer(s.handler(true), &dlq{}, pipeline.Config{Queue: "/queue/x", MaxItems: tc.maxItems,
				MaxMessages: tc.maxMessages, MaxWait: time.Second}, quiet)
			if err := c.Run(context.Background(), feed("a,b", "c,d", "e,f", "g,h", "i,j")); err != nil {
				t.Fatalf("Run = %v", err)
			}
			var sizes []int
			for _, w := range s.writes {
				sizes = append(sizes, len(w))
			}
			if !slices.Equal(sizes, tc.want) {
				t.Fatalf("batch sizes %v, want %v", sizes, tc.want)
			}
		})
	}
}

// TestConsumer_FinishesTheBatchInHand: when the context ends during a
// failing write, the batch is still retried for FlushTimeout; with no
// FlushTimeout only the attempt in hand finishes, and nothing is
// committed or acked (the broker redelivers).
func TestConsumer_FinishesTheBatchInHand(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush time.Duration
		calls int
		saved bool
	}{
		{"OK retried within FlushTimeout", 2 * time.Second, 2, true},
		{"OK attempt in hand only", 0, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &store{failFirst: 1, onWrite: func(call int) {
				if call == 1 {
					cancel()
				}
			}}
			committed := false
			c := pipeline.NewConsumer(s.handler(true), &dlq{}, pipeline.Config{Queue: "/queue/x", MaxItems: 10,
				FlushTimeout: tc.flush, Backoff: pipeline.Backoff{Initial: time.Millisecond, Max: time.Millisecond},
				AfterCommit: func() { committed = true }}, quiet)
			in := make(chan *mq.Delivery, 1)
			in <- &mq.Delivery{Body: []byte("a")}
			if err := c.Run(ctx, in); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if s.calls != tc.calls || committed != tc.saved || (len(s.stored) == 1) != tc.saved {
				t.Fatalf("%d write calls, committed %v, stored %v", s.calls, committed, s.stored)
			}
		})
	}
}

// TestConsumer_AcksAfterCommit runs against the broker: transient write
// errors are retried (never dead-lettered), AfterCommit runs once the batch
// is durable, and only then are the messages acked, so a new subscriber
// finds nothing; a message whose write never committed comes back.
func TestConsumer_AcksAfterCommit(t *testing.T) {
	broker := testenv.MustBroker(t)
	queue := testenv.Queue("pipeline")
	pub := mq.NewPublisher(broker, quiet)
	defer pub.Close()
	for _, b := range []string{"a,b", "c"} {
		if err := pub.Send(context.Background(), queue, []byte(b), nil); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	s, q, m := &store{failFirst: 2}, &dlq{}, testMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var atCommit []string
	c := pipeline.NewConsumer(s.handler(true), q, pipeline.Config{Queue: queue, MaxItems: 3, MaxWait: time.Second,
		Backoff: pipeline.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}, Metrics: m,
		AfterCommit: func() { atCommit = slices.Clone(s.stored) }}, quiet)
	subCtx, cancelSub := context.WithCancel(context.Background())
	sub := mq.Subscribe(subCtx, broker, queue, 10, quiet)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, sub.C()) }()
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(m.Stored) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("messages never stored: %v", s.stored)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	cancelSub()
	<-sub.Done()
	if got := testutil.ToFloat64(m.WriteErrors); got != 2 || len(q.msgs) != 0 {
		t.Fatalf("WriteErrors = %v, dead letters %v; want 2 retried errors, none dead-lettered", got, q.msgs)
	}
	if !slices.Equal(atCommit, []string{"a", "b", "c"}) || testutil.ToFloat64(m.AckErrors) != 0 {
		t.Fatalf("at commit stored %v, ack errors %v", atCommit, testutil.ToFloat64(m.AckErrors))
	}

	// A message whose write never commits is not acked: it comes back.
	if err := pub.Send(context.Background(), queue, []byte("d"), nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	down := &store{failFirst: 1 << 30}
	ctx2, cancel2 := context.WithCancel(context.Background())
	c2 := pipeline.NewConsumer(down.handler(true), q, pipeline.Config{Queue: queue, MaxItems: 1,
		Backoff: pipeline.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}}, quiet)
	sub2Ctx, cancelSub2 := context.WithCancel(context.Background())
	sub2 := mq.Subscribe(sub2Ctx, broker, queue, 10, quiet)
	done2 := make(chan error, 1)
	go func() { done2 <- c2.Run(ctx2, sub2.C()) }()
	for {
		down.mu.Lock()
		n := down.calls
		down.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second consumer never tried to write")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel2()
	<-done2
	cancelSub2()
	<-sub2.Done()

	sub3Ctx, cancelSub3 := context.WithCancel(context.Background())
	defer cancelSub3()
	sub3 := mq.Subscribe(sub3Ctx, broker, queue, 10, quiet)
	select {
	case d := <-sub3.C():
		if string(d.Body) != "d" {
			t.Fatalf("redelivered %q, want only the uncommitted d (a, b and c were acked)", d.Body)
		}
		_ = d.Ack()
	case <-time.After(30 * time.Second):
		t.Fatal("the uncommitted message was not redelivered")
	}
	select {
	case d := <-sub3.C():
		t.Fatalf("also redelivered %q", d.Body)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestConsumer_DecodesWhileWriting: the next batch is decoded while the
// one before it is written (issue 38), and batches are still written in
// delivery order. Before, Run decoded only between writes: the first write
// waited here for a decode that never came.
func TestConsumer_DecodesWhileWriting(t *testing.T) {
	var mu sync.Mutex
	decoded := map[string]bool{}
	decodedNext := make(chan struct{})
	decode := func(body []byte) ([]pipeline.Part[string], []pipeline.Reject, error) {
		mu.Lock()
		decoded[string(body)] = true
		if string(body) == "c,d" {
			close(decodedNext)
		}
		mu.Unlock()
		return decodeItems(body)
	}
	overlapped := false
	writing := make(chan struct{})
	s := &store{onWrite: func(call int) {
		if call != 1 {
			return
		}
		close(writing)
		select {
		case <-decodedNext:
			overlapped = true
		case <-time.After(5 * time.Second):
		}
	}}
	h := s.handler(true)
	h.Decode = decode
	c := pipeline.NewConsumer(h, &dlq{}, pipeline.Config{Queue: "/queue/x", MaxItems: 2, MaxWait: time.Second}, quiet)
	in := make(chan *mq.Delivery, 3)
	in <- &mq.Delivery{Body: []byte("a,b")}
	go func() {
		// The second message arrives once the first batch is being written.
		<-writing
		in <- &mq.Delivery{Body: []byte("c,d")}
		close(in)
	}()
	if err := c.Run(context.Background(), in); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !overlapped {
		t.Fatal("the second batch was not decoded while the first was written")
	}
	if len(s.writes) != 2 || !slices.Equal(s.writes[0], []string{"a", "b"}) || !slices.Equal(s.writes[1], []string{"c", "d"}) {
		t.Fatalf("writes %v, want [a b] then [c d]", s.writes)
	}
}
