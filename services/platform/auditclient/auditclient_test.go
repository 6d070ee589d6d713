package auditclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"threatview/platform/auditclient"
	"threatview/platform/wire"
)

func TestClient_Audit(t *testing.T) {
	status := http.StatusAccepted
	var gotAuth, gotPath string
	var got wire.AuditBatch
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.Path
		b, _ := io.ReadAll(r.Body)
		got, _ = wire.DecodeAuditBatch(b)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"code":"x","message":"y"}}`))
	}))
	defer srv.Close()
	errDown := errors.New("down")
	c := auditclient.New(srv.URL+"/", "key1", auditclient.Options{Timeout: 2 * time.Second, Unavailable: errDown})
	rec := wire.AuditRecord{ID: "0190f0a8-1234-7abc-8def-0123456789ab", Time: time.Now().UTC(), Action: "token.create", Outcome: 201}

	t.Run("OK", func(t *testing.T) {
		if err := c.Audit(context.Background(), rec); err != nil {
			t.Fatalf("Audit = %v, want nil", err)
		}
		if gotAuth != "Bearer key1" || gotPath != "/v1/audit" || len(got.Records) != 1 || got.Records[0].ID != rec.ID {
			t.Fatalf("audit logger got %q %q %+v", gotAuth, gotPath, got)
		}
	})
	t.Run("ErrUnavailable on 500", func(t *testing.T) {
		status = http.StatusInternalServerError
		if err := c.Audit(context.Background(), rec); !errors.Is(err, errDown) {
			t.Fatalf("Audit with 500 = %v, want the Unavailable error", err)
		}
	})
	t.Run("ErrUnavailable when down", func(t *testing.T) {
		srv.Close()
		err := auditclient.New(srv.URL, "key1", auditclient.Options{}).Post(context.Background(), []byte(`{}`))
		if !errors.Is(err, auditclient.ErrUnavailable) {
			t.Fatalf("Post with the logger down = %v, want ErrUnavailable", err)
		}
	})
}
