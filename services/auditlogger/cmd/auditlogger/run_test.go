package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/platform/mq"
	"threatview/platform/testenv"
	"threatview/platform/wire"
)

const internalKey, adminKey = "test-internal", "test-admin"

// start runs the service on port 0 and returns its base URL.
func start(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out testenv.SyncBuffer
	go func() { done <- run(ctx, func(k string) string { return env[k] }, &out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if addr := testenv.ListenAddr(out.String()); addr != "" {
			return "http://" + addr
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("run = %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("service did not start")
		}
	}
}

func baseEnv(t *testing.T, dsn string, broker mq.Config, queue string) map[string]string {
	return map[string]string{
		"HTTP_ADDR":          "127.0.0.1:0",
		"STOMP_ADDR":         broker.Addr,
		"STOMP_LOGIN":        broker.Login,
		"STOMP_PASSCODE":     broker.Passcode,
		"STOMP_DIAL_TIMEOUT": "1s",
		"AUDIT_DATABASE_DSN": dsn,
		"ADMIN_KEY":          adminKey,
		"INTERNAL_KEY":       internalKey,
		"AUDITLOGGER_QUEUE":  queue,
		"LOG_LEVEL":          "info",
	}
}

func post(t *testing.T, base, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/audit", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestRun_Post(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, _ := audittest.MustDB(t)
	queue := testenv.Queue("audit")
	base := start(t, baseEnv(t, dsn, broker, queue))

	// Concurrent posts: every one answered 202 only once durable, and all
	// records reach the queue (coalesced into fewer messages).
	const posts = 40
	want := map[string]bool{}
	bodies := make([]string, posts)
	for i := range bodies {
		r := audittest.Record(i, time.Now())
		r.Body = []byte(`{"secret":"not stored"}`)
		want[r.ID] = true
		b, _ := json.Marshal(r)
		bodies[i] = string(b)
	}
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp := post(t, base, internalKey, b); resp.StatusCode != http.StatusAccepted {
				t.Errorf("POST = %d, want 202", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if resp := post(t, base, "", bodies[0]); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST without key = %d, want 401", resp.StatusCode)
	}
	if resp := post(t, base, adminKey, bodies[0]); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST with the admin key = %d, want 401", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := mq.Subscribe(ctx, broker, queue, 100, slog.New(slog.NewTextHandler(io.Discard, nil)))
	got, messages := 0, 0
	for got < posts {
		select {
		case d := <-sub.C():
			b, err := wire.DecodeAuditBatch(d.Body)
			if err != nil {
				t.Fatal(err)
			}
			messages++
			for _, r := range b.Records {
				if !want[r.ID] {
					t.Fatalf("unexpected record %s", r.ID)
				}
				if r.Body != nil {
					t.Fatalf("body published with AUDITLOGGER_STORE_BODY off")
				}
				got++
			}
			_ = d.Ack()
		case <-ctx.Done():
			t.Fatalf("got %d of %d records from the queue", got, posts)
		}
	}
	t.Logf("%d posts in %d broker messages", posts, messages)
	cancel()
	<-sub.Done()
}

func TestRun_BrokerDown(t *testing.T) {
	dsn, _ := audittest.MustDB(t)
	env := baseEnv(t, dsn, mq.Config{Addr: "127.0.0.1:1"}, testenv.Queue("audit"))
	base := start(t, env)
	b, _ := json.Marshal(audittest.Record(1, time.Now()))
	req, _ := http.NewRequest("POST", base+"/v1/audit", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+internalKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || eb.Error.Code != "unavailable" {
		t.Fatalf("POST with the broker down = %d %q, Retry-After %q; want 503 with Retry-After", resp.StatusCode, eb.Error.Code, resp.Header.Get("Retry-After"))
	}
	r, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the broker down = %d, want 503", r.StatusCode)
	}
}

// TestRun_Query pages through stored records over HTTP with filters.
func TestRun_Query(t *testing.T) {
	broker := testenv.MustBroker(t)
	dsn, db := audittest.MustDB(t)
	base := start(t, baseEnv(t, dsn, broker, testenv.Queue("audit")))
	t0 := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	recs := audittest.Records(450, t0)
	for i := range recs {
		if i%3 == 0 {
			recs[i].Action = "tokens.create"
		}
	}
	if _, err := mariadb.New(db).Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	from, to := t0.Add(20*time.Millisecond), t0.Add(400*time.Millisecond)
	var want []string
	for _, r := range recs { // one millisecond apart: already in time order
		if r.Action == "tokens.create" && r.ActorApp == recs[0].ActorApp && !r.Time.Before(from) && r.Time.Before(to) {
			want = append(want, r.ID)
		}
	}
	q := url.Values{
		"from": {from.Format(time.RFC3339Nano)}, "to": {to.Format(time.RFC3339Nano)},
		"action": {"tokens.create"}, "app_id": {recs[0].ActorApp}, "limit": {"4"},
	}
	var got []string
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		req, _ := http.NewRequest("GET", base+"/v1/audit?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Records    []wire.AuditRecord `json:"records"`
			NextCursor string             `json:"next_cursor"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("GET = %d, %v", resp.StatusCode, err)
		}
		for _, r := range page.Records {
			if seen[r.ID] {
				t.Fatalf("record %s on two pages", r.ID)
			}
			seen[r.ID] = true
			got = append(got, r.ID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Set("cursor", page.NextCursor)
		if pages > 100 {
			t.Fatal("paging does not end")
		}
	}
	if len(want) < 10 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %d records, want %d in order", len(got), len(want))
	}
}
