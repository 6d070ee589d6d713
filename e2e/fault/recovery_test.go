//go:build fault

package fault

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/mq"
	"threatview/platform/testenv"
)

// TestFault_SequentialAfterBrokerRestart: every service's pooled broker
// connections die with a broker restart. As soon as the broker confirms a
// send again, 100 sequential token creations (tokens → audit logger →
// broker) and 100 sequential events (collector → broker) must all succeed:
// no request may meet a dead pooled connection. Then every event is stored
// once with one audit row.
func TestFault_SequentialAfterBrokerRestart(t *testing.T) {
	env := e2etest.MustEnv(t)
	t.Cleanup(func() { testenv.Stack(t, "start", "activemq") })
	ctx := context.Background()
	app := e2etest.NewApp(t, env, "fault-seq")
	since := time.Now().Add(-time.Minute)
	rec := &recorder{}
	s, err := newSender(env, app, uint64(time.Now().UnixNano()), rec)
	if err != nil {
		t.Fatal(err)
	}
	newToken := func() (int, string) {
		body, _ := json.Marshal(map[string]string{"app_id": e2etest.Name("fault-seq-tok"), "name": "after restart"})
		r, err := e2etest.TryDo(http.MethodPost, env.TokensURL+"/v1/tokens", env.AdminKey, body, nil)
		if err != nil {
			return 0, err.Error()
		}
		return r.Status, string(r.Body)
	}

	// Fill every pool: concurrent requests hold several connections each.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); s.send(ctx) }()
		go func() { defer wg.Done(); newToken() }()
	}
	wg.Wait()

	testenv.Stack(t, "restart", "activemq")
	// The broker is back once it confirms a persistent send.
	pub := mq.NewPublisher(testenv.MustBroker(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer pub.Close()
	back := time.Now()
	testenv.MustPing(t, 60*time.Second, "broker after restart", func() error {
		return pub.Send(ctx, testenv.Queue("fault-seq"), []byte(`{}`), nil)
	})
	t.Logf("broker confirms sends %.1f s after the restart returned", time.Since(back).Seconds())

	failedTokens := 0
	for i := 0; i < 100; i++ {
		if status, body := newToken(); status != http.StatusCreated {
			failedTokens++
			t.Errorf("token creation %d after the broker restart: %d %s", i, status, body)
		}
	}
	rec.mu.Lock()
	rec.outcomes = nil // only the sequential requests count below
	rec.mu.Unlock()
	for i := 0; i < 100; i++ {
		if o := s.send(ctx); o.status != http.StatusAccepted {
			t.Errorf("event request %d (%s) after the broker restart: %d %s %s", i, o.rid, o.status, o.code, o.err)
		}
	}
	outs := rec.all()

	// Each 202 stored once, with one audit row; the rest kept nothing.
	pool := e2etest.Events(t, env)
	audit := e2etest.MariaDB(t, env.AuditDSN)
	accepted := 0
	err = e2etest.WaitFor(60*time.Second, func() (bool, error) {
		stored, err := e2etest.StoredCounts(ctx, pool, app.ID, since)
		if err != nil {
			return false, err
		}
		audited, err := e2etest.AuditCounts(ctx, audit, app.ID, since)
		if err != nil {
			return false, err
		}
		accepted = 0
		for _, o := range outs {
			if o.status != http.StatusAccepted {
				continue
			}
			accepted++
			for _, id := range o.ids {
				if stored[id] != 1 {
					return false, nil
				}
			}
			if audited[o.rid] != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil || accepted != 100 {
		t.Errorf("after the restart: %d of 100 events accepted; stored once with one audit row each: %v", accepted, err)
	}
	res := checkOneOutcome(t, ctx, pool, audit, app.ID, since, outs, 30*time.Second)
	t.Logf("after the broker restart: %d of 100 token creations failed, %d of 100 events accepted, %d one-outcome violations",
		failedTokens, accepted, res.violations)
}
