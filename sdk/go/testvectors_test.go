package vectors_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"threatview/sdk/go/threatview"
)

// The shared wire test vectors (sdk/testdata/vectors.json): the Go client
// must do with each answer what the vectors say every SDK does.
const vectorsFile = "../testdata/vectors.json"

type answerCase struct {
	Name    string            `json:"name"`
	Status  int               `json:"status"`
	Network string            `json:"network"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	Expect  struct {
		Action    string `json:"action"`
		MinWaitMS int    `json:"min_wait_ms"`
		Dropped   []int  `json:"dropped"`
		Resend    []int  `json:"resend"`
	} `json:"expect"`
}

type vectorDoc struct {
	Client struct {
		EventIDPattern  string `json:"event_id_pattern"`
		AnswerBatchSize int    `json:"answer_batch_size"`
	} `json:"client"`
	Answers []answerCase `json:"answers"`
}

func readVectors(t *testing.T) vectorDoc {
	t.Helper()
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var doc vectorDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse vectors: %v", err)
	}
	return doc
}

// request is one request the fake collector saw.
type request struct {
	at  time.Time
	ids []string
}

func TestClient_WireVectorAnswers(t *testing.T) {
	doc := readVectors(t)
	n := doc.Client.AnswerBatchSize
	for _, c := range doc.Answers {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var reqs []request
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body io.Reader = r.Body
				if r.Header.Get("Content-Encoding") == "gzip" {
					zr, err := gzip.NewReader(r.Body)
					if err != nil {
						t.Errorf("gzip: %v", err)
						return
					}
					body = zr
				}
				var b struct {
					Events []struct {
						EventID string `json:"event_id"`
					} `json:"events"`
				}
				if err := json.NewDecoder(body).Decode(&b); err != nil {
					t.Errorf("request body: %v", err)
				}
				var ids []string
				for _, e := range b.Events {
					ids = append(ids, e.EventID)
				}
				mu.Lock()
				reqs = append(reqs, request{at: time.Now(), ids: ids})
				first := len(reqs) == 1
				mu.Unlock()
				if !first {
					w.WriteHeader(http.StatusAccepted)
					json.NewEncoder(w).Encode(map[string]any{"accepted": len(ids), "ids": ids})
					return
				}
				if c.Network != "" {
					// Both "reset" and "refused" reach the client as a
					// connection that ends without an answer.
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				for k, v := range c.Headers {
					w.Header().Set(k, v)
				}
				w.WriteHeader(c.Status)
				if len(c.Body) > 0 {
					if c.Body[0] == '"' {
						var s string
						json.Unmarshal(c.Body, &s)
						io.WriteString(w, s)
					} else {
						w.Write(c.Body)
					}
				}
			}))
			defer srv.Close()
			var dropMu sync.Mutex
			var dropped []string
			cl, err := threatview.New(threatview.Config{
				URL: srv.URL, Token: "tok", App: threatview.App{ID: "app-1"},
				MaxBatchEvents: n, Concurrency: 1, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
				OnDrop: func(d threatview.Drop) {
					dropMu.Lock()
					dropped = append(dropped, d.EventIDs...)
					dropMu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, n)
			for i := range ids {
				ids[i] = threatview.NewEventID()
				if ok, _ := regexp.MatchString(doc.Client.EventIDPattern, ids[i]); !ok {
					t.Fatalf("NewEventID() = %q, not like %s", ids[i], doc.Client.EventIDPattern)
				}
				if err := cl.Send(context.Background(), threatview.Event{EventID: ids[i], Type: "app.startup"}); err != nil {
					t.Fatalf("Send: %v", err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := cl.Close(ctx); err != nil && c.Expect.Action != "drop" {
				t.Fatalf("Close: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			pick := func(idx []int) []string {
				var out []string
				for _, i := range idx {
					out = append(out, ids[i])
				}
				return out
			}
			switch c.Expect.Action {
			case "deliver":
				if len(reqs) != 1 || len(dropped) != 0 {
					t.Fatalf("%d requests, dropped %v; want 1 request, nothing dropped", len(reqs), dropped)
				}
			case "retry":
				if len(reqs) != 2 || !slices.Equal(reqs[1].ids, ids) || len(dropped) != 0 {
					t.Fatalf("requests %v, dropped %v; want the same batch twice, nothing dropped", reqs, dropped)
				}
				if wait := reqs[1].at.Sub(reqs[0].at); wait < time.Duration(c.Expect.MinWaitMS)*time.Millisecond {
					t.Errorf("retried after %v, want at least %d ms", wait, c.Expect.MinWaitMS)
				}
			case "drop":
				if want := pick(c.Expect.Dropped); !slices.Equal(dropped, want) {
					t.Errorf("dropped %v, want %v", dropped, want)
				}
				wantReqs := 1
				if len(c.Expect.Resend) > 0 {
					wantReqs = 2
				}
				if len(reqs) != wantReqs {
					t.Fatalf("%d requests, want %d", len(reqs), wantReqs)
				}
				if wantReqs == 2 && !slices.Equal(reqs[1].ids, pick(c.Expect.Resend)) {
					t.Errorf("resent %v, want %v", reqs[1].ids, pick(c.Expect.Resend))
				}
			default:
				t.Fatalf("unknown action %q", c.Expect.Action)
			}
		})
	}
}
