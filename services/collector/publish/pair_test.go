package publish_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"threatview/collector"
	"threatview/collector/publish"
	"threatview/platform/mq"
	"threatview/platform/testenv"
)

func TestGroup_AddPair(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		var mu sync.Mutex
		var gotBody, gotAux string
		var gotItems, gotAuxItems int
		g := publish.NewPaired(publish.Options{Prefix: "[", AuxPrefix: "{", Suffix: "]", Window: 20 * time.Millisecond},
			func(_ context.Context, body []byte, items int, aux []byte, auxItems int) error {
				mu.Lock()
				defer mu.Unlock()
				gotBody, gotAux, gotItems, gotAuxItems = string(body), string(aux), items, auxItems
				return nil
			})
		t1 := g.AddPair([]byte(`1,2`), 2, []byte(`"a"`))
		t2 := g.AddPair([]byte(`3`), 1, nil)
		t3 := g.AddPair([]byte(`4`), 1, []byte(`"b"`))
		for i, tk := range []publish.Ticket{t1, t2, t3} {
			if err := tk.Wait(); err != nil {
				t.Fatalf("Wait(%d) = %v", i, err)
			}
		}
		if gotBody != "[1,2,3,4]" || gotItems != 4 || gotAux != `{"a","b"]` || gotAuxItems != 2 {
			t.Fatalf("sent (%q, %d, %q, %d), want (\"[1,2,3,4]\", 4, `{\"a\",\"b\"]`, 2)", gotBody, gotItems, gotAux, gotAuxItems)
		}
	})
	t.Run("NoAux", func(t *testing.T) {
		var aux []byte = []byte("unset")
		g := publish.NewPaired(publish.Options{Prefix: "[", AuxPrefix: "{", Suffix: "]"},
			func(_ context.Context, _ []byte, _ int, a []byte, _ int) error { aux = a; return nil })
		if err := g.Add([]byte(`1`), 1).Wait(); err != nil || aux != nil {
			t.Fatalf("Add = %v with aux %q, want nil with no paired message", err, aux)
		}
	})
	t.Run("UnpairedGroup", func(t *testing.T) {
		g := publish.New(publish.Options{}, func(context.Context, []byte, int) error { return nil })
		if err := g.AddPair([]byte(`1`), 1, []byte(`"a"`)).Wait(); err == nil {
			t.Fatalf("AddPair on an unpaired group = nil, want an error (nothing would keep the pair)")
		}
	})
}

// The pair really travels in one broker transaction: both messages arrive.
func TestToBrokerTx(t *testing.T) {
	cfg := testenv.MustBroker(t)
	events, audit := testenv.Queue("pubtx"), testenv.Queue("pubtx")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := mq.NewPublisher(cfg, log)
	defer pub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	send := publish.ToBrokerTx(pub, events, audit, 2)
	if err := send(ctx, []byte(`{"v":1,"events":[]}`), 0, []byte(`{"v":1,"records":[]}`), 1); err != nil {
		t.Fatalf("send = %v, want nil", err)
	}
	for q, want := range map[string]string{events: `{"v":1,"events":[]}`, audit: `{"v":1,"records":[]}`} {
		sub := mq.Subscribe(ctx, cfg, q, 1, log)
		select {
		case d := <-sub.C():
			if string(d.Body) != want {
				t.Errorf("body on %s = %q, want %q", q, d.Body, want)
			}
			_ = d.Ack()
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing on %s", q)
		}
	}
}

type txSender struct{ errs []error }

func (s *txSender) SendTx(context.Context, []mq.Message) error {
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

// An attempt whose outcome is unknown keeps the request's outcome unknown
// even when a later attempt fails plainly: the client must be told so.
func TestToBrokerTx_Unconfirmed(t *testing.T) {
	unconfirmed := fmt.Errorf("%w: %w: connection lost after the write", mq.ErrUnavailable, mq.ErrUnconfirmed)
	refused := fmt.Errorf("%w: dial: connection refused", mq.ErrUnavailable)
	tests := []struct {
		name            string
		errs            []error
		wantUnconfirmed bool
	}{
		{"NotSent", []error{refused, refused}, false},
		{"UnconfirmedThenRefused", []error{unconfirmed, refused}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send := publish.ToBrokerTx(&txSender{errs: tt.errs}, "/queue/e", "/queue/a", 2)
			err := send(context.Background(), []byte("{}"), 1, []byte("{}"), 1)
			if !errors.Is(err, collector.ErrUnavailable) || errors.Is(err, collector.ErrUnconfirmed) != tt.wantUnconfirmed {
				t.Fatalf("send = %v, want ErrUnavailable with ErrUnconfirmed %v", err, tt.wantUnconfirmed)
			}
		})
	}
}
