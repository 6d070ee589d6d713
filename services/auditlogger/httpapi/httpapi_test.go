package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"threatview/auditlogger"
	"threatview/auditlogger/httpapi"
	"threatview/auditlogger/internal/audittest"
	"threatview/platform/httpserver"
	"threatview/platform/wire"
)

// fakePublisher records what it is given; err makes it fail.
type fakePublisher struct {
	mu  sync.Mutex
	got [][]wire.AuditRecord
	err error
}

func (f *fakePublisher) Publish(_ context.Context, recs []wire.AuditRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.got = append(f.got, recs)
	return nil
}

type fakeStore struct{ f auditlogger.Filter }

func (s *fakeStore) Insert(context.Context, []wire.AuditRecord) (int, error) { return 0, nil }
func (s *fakeStore) Query(_ context.Context, f auditlogger.Filter) (auditlogger.Page, error) {
	s.f = f
	return auditlogger.Page{Records: []wire.AuditRecord{audittest.Record(1, time.Now())}, Next: &auditlogger.Cursor{Time: time.Now()}}, nil
}

const internalKey, adminKey = "internal-secret", "admin-secret"

func newServer(t *testing.T, pub auditlogger.Publisher, store auditlogger.Store, storeBody bool) *httptest.Server {
	t.Helper()
	api := httpapi.New(pub, store, httpapi.Options{
		InternalKey: internalKey, AdminKey: adminKey, StoreBody: storeBody, MaxRequestBytes: 64 << 10, MaxRecords: 10,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(api.Handler(httpserver.NewRegistry(), nil))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, key, body string) (*http.Response, httpserver.ErrorBody) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb httpserver.ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Fatalf("%s %s: status %d with body %q, want the JSON error body", method, url, resp.StatusCode, data)
		}
	}
	return resp, eb
}

func recJSON(t *testing.T, r wire.AuditRecord) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPost(t *testing.T) {
	now := time.Now().UTC()
	one := audittest.Record(1, now)
	one.Body = []byte(`{"events":[]}`)
	bad := audittest.Record(2, now)
	bad.ClientIP = "nope"
	batchOf := func(rs ...wire.AuditRecord) string {
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = recJSON(t, r)
		}
		return `{"v":1,"records":[` + strings.Join(parts, ",") + `]}`
	}
	eleven := make([]wire.AuditRecord, 11)
	for i := range eleven {
		eleven[i] = audittest.Record(i, now)
	}
	tests := []struct {
		name, key, body string
		status          int
		code, field     string
		index           *int
		records         int
	}{
		{"OK record", internalKey, recJSON(t, one), 202, "", "", nil, 1},
		{"OK batch", internalKey, batchOf(one, audittest.Record(3, now)), 202, "", "", nil, 2},
		{"NoKey", "", recJSON(t, one), 401, "unauthorized", "", nil, 0},
		{"WrongKey", adminKey, recJSON(t, one), 401, "unauthorized", "", nil, 0},
		{"Malformed", internalKey, `{"id":`, 400, "malformed_body", "", nil, 0},
		{"NotObject", internalKey, `[1,2]`, 400, "malformed_body", "", nil, 0},
		{"BadFieldInBatch", internalKey, batchOf(one, bad), 422, "invalid_record", "client_ip", ptr(1), 0},
		{"WrongType", internalKey, `{"id":"x","outcome":"202"}`, 422, "invalid_record", "outcome", nil, 0},
		{"BadTime", internalKey, `{"id":"x","time":"yesterday"}`, 422, "invalid_record", "time", nil, 0},
		{"BadVersion", internalKey, `{"v":2,"records":[` + recJSON(t, one) + `]}`, 422, "invalid_record", "v", nil, 0},
		{"EmptyBatch", internalKey, `{"v":1,"records":[]}`, 422, "invalid_record", "records", nil, 0},
		{"MissingID", internalKey, `{"action":"events.collect","outcome":202,"time":"2026-01-01T00:00:00Z"}`, 422, "invalid_record", "id", nil, 0},
		{"TooManyRecords", internalKey, batchOf(eleven...), 413, "too_large", "", nil, 0},
		{"TooLarge", internalKey, `{"id":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "too_large", "", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{}
			srv := newServer(t, pub, &fakeStore{}, false)
			resp, eb := do(t, "POST", srv.URL+"/v1/audit", tt.key, tt.body)
			if resp.StatusCode != tt.status || eb.Error.Code != tt.code {
				t.Fatalf("POST = %d %q (%s), want %d %q", resp.StatusCode, eb.Error.Code, eb.Error.Message, tt.status, tt.code)
			}
			if tt.field != "" {
				d, _ := eb.Error.Details.(map[string]any)
				if d["field"] != tt.field {
					t.Fatalf("details = %v, want field %q", eb.Error.Details, tt.field)
				}
				if tt.index != nil && d["index"] != float64(*tt.index) {
					t.Fatalf("details = %v, want index %d", eb.Error.Details, *tt.index)
				}
			}
			n := 0
			for _, g := range pub.got {
				n += len(g)
				for _, r := range g {
					if r.Body != nil {
						t.Fatalf("body published with storing off")
					}
				}
			}
			if n != tt.records {
				t.Fatalf("published %d records, want %d", n, tt.records)
			}
		})
	}
	t.Run("OK body kept when storing", func(t *testing.T) {
		pub := &fakePublisher{}
		srv := newServer(t, pub, &fakeStore{}, true)
		if resp, _ := do(t, "POST", srv.URL+"/v1/audit", internalKey, recJSON(t, one)); resp.StatusCode != 202 {
			t.Fatalf("POST = %d", resp.StatusCode)
		}
		if string(pub.got[0][0].Body) != string(one.Body) {
			t.Fatalf("body = %q, want %q", pub.got[0][0].Body, one.Body)
		}
	})
	t.Run("Unavailable", func(t *testing.T) {
		pub := &fakePublisher{err: fmt.Errorf("send: %w", auditlogger.ErrUnavailable)}
		srv := newServer(t, pub, &fakeStore{}, false)
		resp, eb := do(t, "POST", srv.URL+"/v1/audit", internalKey, recJSON(t, one))
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || eb.Error.Code != "unavailable" {
			t.Fatalf("POST = %d %q Retry-After %q, want 503 with Retry-After", resp.StatusCode, eb.Error.Code, resp.Header.Get("Retry-After"))
		}
	})
	t.Run("UnsupportedMediaType", func(t *testing.T) {
		srv := newServer(t, &fakePublisher{}, &fakeStore{}, false)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/audit", strings.NewReader(recJSON(t, one)))
		req.Header.Set("Authorization", "Bearer "+internalKey)
		req.Header.Set("Content-Type", "text/plain")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 415 {
			t.Fatalf("POST text/plain = %d, want 415", resp.StatusCode)
		}
	})
}

func ptr(i int) *int { return &i }

func TestGet(t *testing.T) {
	c := auditlogger.Cursor{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	tests := []struct {
		name, key, query string
		status           int
		param            string
	}{
		{"OK", adminKey, "?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z&actor=tok&action=events.collect&app_id=a&limit=5&cursor=" + c.Encode(), 200, ""},
		{"NoKey", "", "", 401, ""},
		{"InternalKeyRefused", internalKey, "", 401, ""},
		{"BadFrom", adminKey, "?from=yesterday", 400, "from"},
		{"ToBeforeFrom", adminKey, "?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", 400, "to"},
		{"BadLimit", adminKey, "?limit=0", 400, "limit"},
		{"LimitTooBig", adminKey, "?limit=1001", 400, "limit"},
		{"BadCursor", adminKey, "?cursor=zzz", 400, "cursor"},
		{"Unknown", adminKey, "?colour=red", 400, "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{}
			srv := newServer(t, &fakePublisher{}, st, false)
			resp, eb := do(t, "GET", srv.URL+"/v1/audit"+tt.query, tt.key, "")
			if resp.StatusCode != tt.status {
				t.Fatalf("GET = %d (%s), want %d", resp.StatusCode, eb.Error.Message, tt.status)
			}
			if tt.param != "" {
				if d, _ := eb.Error.Details.(map[string]any); d["parameter"] != tt.param {
					t.Fatalf("details = %v, want parameter %q", eb.Error.Details, tt.param)
				}
			}
			if tt.status == 200 {
				f := st.f
				if f.Limit != 5 || f.Actor != "tok" || f.Action != "events.collect" || f.AppID != "a" || f.After == nil || !f.After.Time.Equal(c.Time) || f.From.IsZero() || f.To.IsZero() {
					t.Fatalf("filter = %+v", f)
				}
			}
		})
	}
	t.Run("OK default limit and next cursor", func(t *testing.T) {
		st := &fakeStore{}
		srv := newServer(t, &fakePublisher{}, st, false)
		req, _ := http.NewRequest("GET", srv.URL+"/v1/audit", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Records    []wire.AuditRecord `json:"records"`
			NextCursor string             `json:"next_cursor"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Records) != 1 || out.NextCursor == "" {
			t.Fatalf("GET = %+v, %v", out, err)
		}
		if st.f.Limit != auditlogger.DefaultLimit {
			t.Fatalf("limit = %d, want %d", st.f.Limit, auditlogger.DefaultLimit)
		}
	})
}

// FuzzDecodeAuditBatch checks that the worker's decoder and the POST parser
// never panic, and that whatever the POST parser accepts, once wrapped in a
// batch, the worker's decoder accepts too (an accepted record is never
// dead-lettered).
func FuzzDecodeAuditBatch(f *testing.F) {
	r := audittest.Record(1, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	one, _ := json.Marshal(r)
	f.Add(one)
	f.Add([]byte(`{"v":1,"records":[` + string(one) + `]}`))
	f.Add([]byte(`{"v":1,"records":[]}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"id":"0192f1c4-7a4b-7cde-8f00-1234567890ab","time":"2026-01-01T00:00:00Z","action":"a","outcome":200,"client_ip":"::1","user_agent":"\u00e9\u0000"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"records":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = wire.DecodeAuditBatch(data)
		recs, err := httpapi.DecodePost(data, 1000, false)
		if err != nil {
			if !errors.Is(err, auditlogger.ErrInvalid) && !errors.Is(err, auditlogger.ErrMalformed) && !errors.Is(err, auditlogger.ErrTooLarge) {
				t.Fatalf("DecodePost error %v wraps no sentinel", err)
			}
			return
		}
		body, err := json.Marshal(wire.AuditBatch{V: wire.Version, Records: recs})
		if err != nil {
			t.Fatalf("marshal accepted records: %v", err)
		}
		b, err := wire.DecodeAuditBatch(body)
		if err != nil {
			t.Fatalf("worker refuses what the logger accepted: %v\ninput %q", err, data)
		}
		for i := range b.Records {
			auditlogger.Normalize(&b.Records[i], true)
			if err := auditlogger.Validate(&b.Records[i], i); err != nil {
				t.Fatalf("record %d invalid after a round trip: %v\ninput %q", i, err, data)
			}
		}
	})
}

// BenchmarkPost measures the POST handler's own cost (parse, validate,
// encode for the broker) for one collector-like record.
func BenchmarkPost(b *testing.B) {
	api := httpapi.New(nopPublisher{}, &fakeStore{}, httpapi.Options{InternalKey: internalKey, AdminKey: adminKey},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	h := api.Handler(httpserver.NewRegistry(), nil)
	body, _ := json.Marshal(audittest.Record(1, time.Now()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("POST", "/v1/audit", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+internalKey)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusAccepted {
			b.Fatalf("POST = %d", w.Code)
		}
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(_ context.Context, recs []wire.AuditRecord) error {
	_, err := json.Marshal(recs)
	return err
}
