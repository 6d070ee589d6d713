package publish_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"threatview/collector"
	"threatview/collector/publish"
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
	send := publish.ToAuditLogger(srv.URL+"/", "key1", srv.Client())
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
