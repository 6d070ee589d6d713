package publish_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"threatview/collector"
	"threatview/collector/publish"
	"threatview/platform/auditclient"
	"threatview/platform/mq"
	"threatview/platform/testenv"
)

type flakySender struct {
	fails int // the first fails sends fail at once
	calls int
}

func (f *flakySender) Send(context.Context, string, []byte, map[string]string) error {
	f.calls++
	if f.calls <= f.fails {
		return errors.New("connection already closed")
	}
	return nil
}

func TestToBroker(t *testing.T) {
	t.Run("OK after fast failures", func(t *testing.T) {
		s := &flakySender{fails: 2}
		if err := publish.ToBroker(s, "/queue/x", 3)(context.Background(), []byte("{}"), 1); err != nil || s.calls != 3 {
			t.Fatalf("send = %v after %d calls, want nil after 3", err, s.calls)
		}
	})
	t.Run("ErrUnavailable", func(t *testing.T) {
		s := &flakySender{fails: 10}
		err := publish.ToBroker(s, "/queue/x", 3)(context.Background(), []byte("{}"), 1)
		if !errors.Is(err, collector.ErrUnavailable) || s.calls != 3 {
			t.Fatalf("send = %v after %d calls, want ErrUnavailable after 3", err, s.calls)
		}
	})
}

func TestToAuditLogger(t *testing.T) {
	status := http.StatusAccepted
	var gotAuth, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		b := make([]byte, 64)
		n, _ := r.Body.Read(b)
		gotBody = string(b[:n])
		if r.URL.Path != "/v1/audit" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	send := publish.ToAuditLogger(auditclient.New(srv.URL+"/", "key1", auditclient.Options{HTTP: srv.Client()}))
	if err := send(context.Background(), []byte(`{"v":1}`), 1); err != nil {
		t.Fatalf("send = %v", err)
	}
	if gotAuth != "Bearer key1" || gotBody != `{"v":1}` {
		t.Fatalf("audit logger got %q %q", gotAuth, gotBody)
	}
	status = http.StatusInternalServerError
	if err := send(context.Background(), []byte(`{"v":1}`), 1); !errors.Is(err, collector.ErrUnavailable) {
		t.Fatalf("send with 500 = %v, want ErrUnavailable", err)
	}
	srv.Close()
	if err := send(context.Background(), []byte(`{"v":1}`), 1); !errors.Is(err, collector.ErrUnavailable) {
		t.Fatalf("send with the logger down = %v, want ErrUnavailable", err)
	}
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
