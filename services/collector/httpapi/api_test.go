package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/collector"
	"threatview/collector/httpapi"
	"threatview/collector/publish"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

const (
	goodToken = "tok-good"
	downToken = "tok-down"
)

type fakeAuth struct{}

func (fakeAuth) Check(_ context.Context, token string) (collector.Identity, error) {
	switch token {
	case goodToken:
		return collector.Identity{TokenID: "t1", AppID: "app1"}, nil
	case downToken:
		return collector.Identity{}, fmt.Errorf("%w: tokens service down", collector.ErrUnavailable)
	}
	return collector.Identity{}, collector.ErrUnauthorized
}

type fakeLocator struct{}

func (fakeLocator) Country(ip netip.Addr) string {
	if ip == netip.MustParseAddr("1.0.0.10") {
		return "AU"
	}
	return collector.UnknownCountry
}

// sink records the messages of a publish.Group; fail makes sends fail and
// hold makes them wait.
type sink struct {
	mu      sync.Mutex
	msgs    [][]byte
	fail    error
	hold    chan struct{}
	entered chan struct{} // when not nil, signalled as each send starts
}

func (s *sink) send(ctx context.Context, body []byte, _ int) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", collector.ErrUnavailable, ctx.Err())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.msgs = append(s.msgs, append([]byte(nil), body...))
	return nil
}

func (s *sink) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.msgs...)
}

type fixture struct {
	h      http.Handler
	events *sink
	audit  *sink
}

func newFixture(t testing.TB, mutate func(*httpapi.Deps)) *fixture {
	f := &fixture{events: &sink{}, audit: &sink{}}
	d := httpapi.Deps{
		Auth:        fakeAuth{},
		Enricher:    collector.NewEnricher(fakeLocator{}, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}),
		Events:      publish.New(publish.Options{Prefix: publish.EventsPrefix, Suffix: publish.Suffix, Concurrency: 2, Timeout: 2 * time.Second}, func(ctx context.Context, b []byte, n int) error { return f.events.send(ctx, b, n) }),
		MaxInFlight: 100,
		RetryAfter:  2 * time.Second,
	}
	if mutate != nil {
		mutate(&d)
	}
	f.h = httpapi.New(d)
	return f
}

// withAudit turns auditing on as the collector's run does: the events group
// is paired, and its send stands in for a broker transaction (the events
// message and the audit message are both recorded, or, when either sink
// fails, neither).
func withAudit(f **fixture) func(*httpapi.Deps) {
	return func(d *httpapi.Deps) {
		d.Audit = publish.New(publish.Options{Prefix: publish.AuditPrefix, Suffix: publish.Suffix, Concurrency: 2, Timeout: 2 * time.Second},
			func(ctx context.Context, b []byte, n int) error { return (*f).audit.send(ctx, b, n) })
		d.Events = publish.NewPaired(publish.Options{Prefix: publish.EventsPrefix, AuxPrefix: publish.AuditPrefix, Suffix: publish.Suffix, Concurrency: 2, Timeout: 2 * time.Second},
			func(ctx context.Context, b []byte, n int, aux []byte, na int) error {
				return (*f).sendTx(ctx, b, n, aux, na)
			})
	}
}

func (f *fixture) sendTx(ctx context.Context, body []byte, n int, aux []byte, na int) error {
	f.events.mu.Lock()
	errEvents := f.events.fail
	f.events.mu.Unlock()
	f.audit.mu.Lock()
	errAudit := f.audit.fail
	f.audit.mu.Unlock()
	if err := errors.Join(errEvents, errAudit); err != nil {
		return err
	}
	if err := f.events.send(ctx, body, n); err != nil {
		return err
	}
	if aux != nil {
		return f.audit.send(ctx, aux, na)
	}
	return nil
}

type request struct {
	method, path string
	body         []byte
	header       map[string]string
}

func post(body string) request {
	return request{method: http.MethodPost, path: "/v1/events", body: []byte(body), header: map[string]string{
		"Authorization": "Bearer " + goodToken, "Content-Type": "application/json",
	}}
}

func (r request) with(k, v string) request {
	h := map[string]string{}
	for a, b := range r.header {
		h[a] = b
	}
	if v == "" {
		delete(h, k)
	} else {
		h[k] = v
	}
	r.header = h
	return r
}

func (f *fixture) do(t testing.TB, r request) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(r.method, r.path, bytes.NewReader(r.body))
	req.RemoteAddr = "1.0.0.10:4321"
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	return w
}

func errorBody(t *testing.T, w *httptest.ResponseRecorder) httpserver.ErrorDetail {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json (body %s)", ct, w.Body)
	}
	var b struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %s: %v", w.Body, err)
	}
	if b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("error body %s lacks code or message", w.Body)
	}
	return httpserver.ErrorDetail{Code: b.Error.Code, Message: b.Error.Message, Details: b.Error.Details}
}

const event = `{"type":"app.startup","app":{"id":"app1","version":"1.0"},"device":{"model":"Pixel 8","os":"android"},"threats":[]}`

func gz(t testing.TB, s []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(s); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return b.Bytes()
}

type accepted struct {
	Accepted int      `json:"accepted"`
	IDs      []string `json:"ids"`
}

func TestPostEvents_Accepted(t *testing.T) {
	t.Run("OK single", func(t *testing.T) {
		f := newFixture(t, nil)
		w := f.do(t, post(event).with("X-Request-ID", "req-123"))
		if w.Code != http.StatusAccepted {
			t.Fatalf("status = %d %s", w.Code, w.Body)
		}
		var a accepted
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Accepted != 1 || len(a.IDs) != 1 {
			t.Fatalf("body = %s (%v)", w.Body, err)
		}
		if got := w.Header().Get("X-Request-ID"); got != "req-123" {
			t.Fatalf("X-Request-ID = %q", got)
		}
		msgs := f.events.messages()
		if len(msgs) != 1 {
			t.Fatalf("%d messages, want 1", len(msgs))
		}
		b, err := wire.DecodeEventBatch(msgs[0])
		if err != nil {
			t.Fatalf("DecodeEventBatch(%s) = %v", msgs[0], err)
		}
		ev := b.Events[0]
		if ev.ID != a.IDs[0] || ev.Country != "AU" || ev.ClientIP != "1.0.0.0" || ev.TokenID != "t1" || ev.RequestID != "req-123" || ev.Device.Model != "Pixel 8" || string(ev.Threats) != "[]" {
			t.Fatalf("event = %+v", ev)
		}
	})
	t.Run("OK batch gzip", func(t *testing.T) {
		f := newFixture(t, nil)
		body := `{"events":[` + event + `,` + event + `,` + event + `]}`
		w := f.do(t, post("").with("Content-Encoding", "gzip").with("Content-Type", "application/json; charset=utf-8").withBody(gz(t, []byte(body))))
		if w.Code != http.StatusAccepted {
			t.Fatalf("status = %d %s", w.Code, w.Body)
		}
		var a accepted
		_ = json.Unmarshal(w.Body.Bytes(), &a)
		if a.Accepted != 3 || len(a.IDs) != 3 {
			t.Fatalf("body = %s", w.Body)
		}
		if w.Header().Get("X-Request-ID") == "" {
			t.Fatal("no generated X-Request-ID")
		}
		b, err := wire.DecodeEventBatch(f.events.messages()[0])
		if err != nil || len(b.Events) != 3 {
			t.Fatalf("message: %d events, %v", len(b.Events), err)
		}
	})
	t.Run("OK audit record", func(t *testing.T) {
		var f *fixture
		f = newFixture(t, withAudit(&f))
		body := `{"events":[` + event + `,` + event + `]}`
		w := f.do(t, post(body).with("User-Agent", "probe/1").with("X-Request-ID", "rid-9"))
		if w.Code != http.StatusAccepted {
			t.Fatalf("status = %d %s", w.Code, w.Body)
		}
		msgs := f.audit.messages()
		if len(msgs) != 1 {
			t.Fatalf("%d audit messages, want 1", len(msgs))
		}
		ab, err := wire.DecodeAuditBatch(msgs[0])
		if err != nil {
			t.Fatalf("DecodeAuditBatch(%s) = %v", msgs[0], err)
		}
		rec := ab.Records[0]
		sum := sha256.Sum256([]byte(body))
		if rec.Action != "events.collect" || rec.Outcome != 202 || rec.EventCount != 2 || rec.ActorApp != "app1" || rec.ActorToken != "t1" ||
			rec.UserAgent != "probe/1" || rec.RequestID != "rid-9" || rec.ClientIP != "1.0.0.0" || rec.BodySHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("audit record = %+v", rec)
		}
	})
}

func (r request) withBody(b []byte) request { r.body = b; return r }

func TestPostEvents_Errors(t *testing.T) {
	big := `{"type":"t","app":{"id":"app1"},"attributes":{"x":"` + strings.Repeat("a", collector.MaxEventBytes) + `"}}`
	var many strings.Builder
	many.WriteString(`{"events":[`)
	for i := 0; i <= collector.MaxBatchEvents; i++ {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`{"type":"t","app":{"id":"app1"}}`)
	}
	many.WriteString(`]}`)
	// A body that is over 1 MiB but every event is small.
	var huge strings.Builder
	huge.WriteString(`{"events":[`)
	for i := 0; i < 40; i++ {
		if i > 0 {
			huge.WriteByte(',')
		}
		huge.WriteString(`{"type":"t","app":{"id":"app1"},"attributes":{"x":"` + strings.Repeat("b", 30000) + `"}}`)
	}
	huge.WriteString(`]}`)
	bomb := gz(t, bytes.Repeat([]byte(" "), 8<<20))

	tests := []struct {
		name    string
		req     request
		status  int
		code    string
		details map[string]any
	}{
		{"400 malformed JSON", post(`{"type":`), 400, "malformed_body", nil},
		{"400 bad gzip", post("not gzip").with("Content-Encoding", "gzip"), 400, "malformed_body", nil},
		{"401 missing token", post(event).with("Authorization", ""), 401, "unauthorized", nil},
		{"401 bad token", post(event).with("Authorization", "Bearer nope"), 401, "unauthorized", nil},
		{"403 other app", post(`{"events":[` + event + `,{"type":"t","app":{"id":"app2"}}]}`), 403, "forbidden", map[string]any{"index": 1.0, "field": "app.id"}},
		{"404 unknown path", request{method: "GET", path: "/v2/nothing"}, 404, "not_found", nil},
		{"405 wrong method", request{method: "GET", path: "/v1/events"}, 405, "method_not_allowed", nil},
		{"413 event over 32 KiB", post(big), 413, "too_large", nil},
		{"413 more than 500 events", post(many.String()), 413, "too_large", map[string]any{"field": "events"}},
		{"413 body over 1 MiB", post(huge.String()), 413, "too_large", nil},
		{"413 gzip bomb", post("").with("Content-Encoding", "gzip").withBody(bomb), 413, "too_large", nil},
		{"415 text/plain", post(event).with("Content-Type", "text/plain"), 415, "unsupported_media_type", nil},
		{"415 no content type", post(event).with("Content-Type", ""), 415, "unsupported_media_type", nil},
		{"415 latin1", post(event).with("Content-Type", "application/json; charset=latin1"), 415, "unsupported_media_type", nil},
		{"415 brotli", post(event).with("Content-Encoding", "br"), 415, "unsupported_media_type", nil},
		{"422 missing type", post(`{"app":{"id":"app1"}}`), 422, "invalid_event", map[string]any{"field": "type"}},
		{"422 unknown field", post(`{"events":[` + event + `,{"type":"t","app":{"id":"app1"},"extra":true}]}`), 422, "invalid_event", map[string]any{"index": 1.0, "field": "extra"}},
		{"422 wrong type", post(`{"type":"t","app":{"id":["x"]}}`), 422, "invalid_event", map[string]any{"field": "app.id"}},
		{"503 tokens down", post(event).with("Authorization", "Bearer "+downToken), 503, "unavailable", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			w := f.do(t, tt.req)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d (%s)", w.Code, tt.status, w.Body)
			}
			e := errorBody(t, w)
			if e.Code != tt.code {
				t.Fatalf("code = %s, want %s (%s)", e.Code, tt.code, w.Body)
			}
			if tt.details != nil {
				d, _ := e.Details.(map[string]any)
				for k, v := range tt.details {
					if d[k] != v {
						t.Fatalf("details = %v, want %s=%v", e.Details, k, v)
					}
				}
			}
			if tt.status == 503 && w.Header().Get("Retry-After") != "2" {
				t.Fatalf("Retry-After = %q, want 2", w.Header().Get("Retry-After"))
			}
			if tt.status == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if n := len(f.events.messages()); n != 0 {
				t.Fatalf("a rejected request published %d messages", n)
			}
		})
	}
}

func TestPostEvents_Unavailable(t *testing.T) {
	t.Run("ErrBroker", func(t *testing.T) {
		f := newFixture(t, nil)
		f.events.fail = fmt.Errorf("%w: connection refused", collector.ErrUnavailable)
		w := f.do(t, post(event))
		if w.Code != 503 || w.Header().Get("Retry-After") == "" {
			t.Fatalf("status = %d Retry-After %q, want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
		if e := errorBody(t, w); e.Code != "unavailable" || strings.Contains(e.Message, "refused") {
			t.Fatalf("error = %+v (the cause must stay in the log)", e)
		}
	})
	t.Run("ErrTransaction", func(t *testing.T) {
		// The events and the audit record are one transaction: when it
		// fails the client gets 503 and neither is durable.
		for _, side := range []string{"events", "audit"} {
			var f *fixture
			f = newFixture(t, withAudit(&f))
			if side == "events" {
				f.events.fail = fmt.Errorf("%w: receipt timeout", collector.ErrUnavailable)
			} else {
				f.audit.fail = fmt.Errorf("%w: broker refused the audit message", collector.ErrUnavailable)
			}
			w := f.do(t, post(event))
			if w.Code != 503 || w.Header().Get("Retry-After") == "" {
				t.Fatalf("%s failing: status = %d, want 503 with Retry-After", side, w.Code)
			}
			errorBody(t, w)
			if e, a := len(f.events.messages()), len(f.audit.messages()); e != 0 || a != 0 {
				t.Fatalf("%s failing: %d events and %d audit messages durable, want none", side, e, a)
			}
		}
	})
	t.Run("ErrOverloaded", func(t *testing.T) {
		hold := make(chan struct{})
		f := newFixture(t, func(d *httpapi.Deps) { d.MaxInFlight = 1 })
		f.events.hold = hold
		f.events.entered = make(chan struct{}, 1)
		done := make(chan int)
		go func() { done <- f.do(t, post(event)).Code }()
		<-f.events.entered // the first request holds the only in-flight place
		w := f.do(t, post(event))
		close(hold)
		if w.Code != 503 || errorBody(t, w).Code != "overloaded" || w.Header().Get("Retry-After") == "" {
			t.Fatalf("second request = %d %s, want 503 overloaded", w.Code, w.Body)
		}
		if code := <-done; code != 202 {
			t.Fatalf("first request = %d, want 202", code)
		}
	})
}

func TestPostEvents_RateLimit(t *testing.T) {
	f := newFixture(t, func(d *httpapi.Deps) { d.RateLimit = 0.01; d.RateBurst = 2 })
	for i := 0; i < 2; i++ {
		if w := f.do(t, post(event)); w.Code != 202 {
			t.Fatalf("request %d = %d, want 202", i, w.Code)
		}
	}
	w := f.do(t, post(event))
	if w.Code != 429 {
		t.Fatalf("third request = %d, want 429", w.Code)
	}
	if e := errorBody(t, w); e.Code != "rate_limited" {
		t.Fatalf("code = %s", e.Code)
	}
	if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
}

func TestCORS(t *testing.T) {
	f := newFixture(t, func(d *httpapi.Deps) { d.CORSOrigins = []string{"https://app.example"} })
	pre := request{method: http.MethodOptions, path: "/v1/events", header: map[string]string{
		"Origin": "https://app.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}}
	w := f.do(t, pre)
	if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight = %d %v", w.Code, w.Header())
	}
	w = f.do(t, post(event).with("Origin", "https://app.example"))
	if w.Code != 202 || w.Header().Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("post = %d %v", w.Code, w.Header())
	}
	w = f.do(t, post(event).with("Origin", "https://evil.example"))
	if w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("other origin got CORS headers: %v", w.Header())
	}
}

func TestPostEvents_ConcurrentShareMessages(t *testing.T) {
	f := newFixture(t, nil)
	hold := make(chan struct{})
	f.events.hold = hold
	const n = 40
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- f.do(t, post(event)).Code
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(hold)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 202 {
			t.Fatalf("status %d, want 202", c)
		}
	}
	total := 0
	msgs := f.events.messages()
	for _, m := range msgs {
		b, err := wire.DecodeEventBatch(m)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b.Events)
	}
	if total != n || len(msgs) >= n {
		t.Fatalf("%d events in %d messages, want %d in fewer messages", total, len(msgs), n)
	}
}

// BenchmarkHandler measures the whole handler path (token check, decoding,
// enrichment, encoding, group commit) with a publisher that confirms at once.
func BenchmarkHandler(b *testing.B) {
	for _, bc := range []struct {
		name string
		body string
	}{
		{"single", event},
		{"batch50", `{"events":[` + strings.TrimSuffix(strings.Repeat(event+",", 50), ",") + `]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, func(d *httpapi.Deps) {
				d.Events = publish.New(publish.Options{Prefix: publish.EventsPrefix, Suffix: publish.Suffix, Concurrency: 4},
					func(context.Context, []byte, int) error { return nil })
			})
			body := []byte(bc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/v1/events", bytes.NewReader(body))
					req.RemoteAddr = "1.0.0.10:4321"
					req.Header.Set("Authorization", "Bearer "+goodToken)
					req.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					f.h.ServeHTTP(w, req)
					if w.Code != http.StatusAccepted {
						b.Fatalf("status %d %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
