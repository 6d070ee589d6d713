package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
	"threatview/tokens/broker"
)

// TestAPI_RevokeAnnounces: DELETE answers 204 only after the revocation is
// on the broker topic, carrying the hash the collectors' caches are keyed by.
func TestAPI_RevokeAnnounces(t *testing.T) {
	cfg := testenv.MustBroker(t)
	topic := "/topic/" + testenv.Name("test.revocations")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := mq.NewPublisher(cfg, log)
	defer pub.Close()
	e := newEnvAnnouncing(t, "", broker.New(pub, topic))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := mq.Subscribe(ctx, cfg, topic, 10, log)
	testenv.MustPing(t, 10*time.Second, "revocation topic subscription", func() error { return sub.Ready(ctx) })
	time.Sleep(200 * time.Millisecond) // SUBSCRIBE is sent without a receipt

	c := e.create(t, "app-announce", "")
	if status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+c.ID, adminKey, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s, want 204", status, raw)
	}
	select {
	case d := <-sub.C():
		var rev wire.Revocation
		if err := json.Unmarshal(d.Body, &rev); err != nil {
			t.Fatalf("decode %s: %v", d.Body, err)
		}
		sum := sha256.Sum256([]byte(c.Token))
		if rev.TokenID != c.ID || rev.AppID != "app-announce" || rev.TokenSHA256 != hex.EncodeToString(sum[:]) || rev.RevokedAt == "" {
			t.Errorf("revocation = %+v, want token %s of app-announce with its hash and time", rev, c.ID)
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("Ack = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no revocation on the topic within 10 s of the 204")
	}
}

// TestAPI_RevokeBrokerDown: with the broker unreachable the token is still
// revoked (a leaked token must be revocable), but the answer is a 503 the
// operator repeats, never a 204 that promises what was not done.
func TestAPI_RevokeBrokerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub := mq.NewPublisher(mq.Config{Addr: addr, DialTimeout: time.Second, ReceiptTimeout: time.Second}, log)
	defer pub.Close()
	e := newEnvAnnouncing(t, "", broker.New(pub, "/topic/test.none"))

	c := e.create(t, "app-announce", "")
	status, raw := e.do(t, http.MethodDelete, "/v1/tokens/"+c.ID, adminKey, "")
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &body)
	if status != http.StatusServiceUnavailable || body.Error.Code != "revocation_not_announced" {
		t.Fatalf("DELETE with the broker down = %d %s, want 503 revocation_not_announced", status, raw)
	}
	if got, _ := e.introspect(t, c.Token); got.Active {
		t.Errorf("introspect after the 503 = active, want revoked")
	}
}
