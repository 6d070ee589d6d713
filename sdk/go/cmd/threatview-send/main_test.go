package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestRun(t *testing.T) {
	var mu sync.Mutex
	ids := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		data, _ := io.ReadAll(zr)
		var b struct {
			Events []map[string]any `json:"events"`
		}
		if err := json.Unmarshal(data, &b); err != nil {
			t.Error(err)
		}
		for i, e := range b.Events {
			if e["type"] == "refused" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnprocessableEntity)
				io.WriteString(w, `{"error":{"code":"invalid_event","message":"no","details":{"index":`+string(rune('0'+i))+`}}}`)
				return
			}
		}
		mu.Lock()
		for _, e := range b.Events {
			ids[e["event_id"].(string)]++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"accepted":1,"ids":[]}`)
	}))
	defer srv.Close()
	env := map[string]string{"THREATVIEW_COLLECTOR_URL": srv.URL, "THREATVIEW_DEMO_TOKEN": "tok"}

	t.Run("OK", func(t *testing.T) {
		in := strings.Repeat(`{"type":"app.startup","app":{"id":"a"}}`+"\n", 1200) + "\n" +
			`{"type":"app.startup","app":{"id":"a"},"event_id":"0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}`
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"-progress", "0"}, func(k string) string { return env[k] }, strings.NewReader(in), &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "1201 events delivered, 0 dropped") {
			t.Errorf("run = %d, stdout %q, stderr %q", code, out.String(), errb.String())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ids) != 1201 || ids["0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"] != 1 {
			t.Errorf("%d distinct ids stored, want 1201 with the given one kept", len(ids))
		}
	})

	t.Run("BadLines", func(t *testing.T) {
		in := `{"type":"app.startup","app":{"id":"a"}}` + "\nnot json\n" + `{"type":"refused","app":{"id":"a"}}` + "\n"
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"-progress", "0"}, func(k string) string { return env[k] }, strings.NewReader(in), &out, &errb)
		if code != 1 || !strings.Contains(out.String(), "1 events delivered, 1 dropped, 1 invalid lines") ||
			!strings.Contains(errb.String(), "-:2:") || !strings.Contains(errb.String(), "HTTP 422") {
			t.Errorf("run = %d, stdout %q, stderr %q; want 1, one delivered, one dropped (422), line 2 invalid", code, out.String(), errb.String())
		}
	})

	t.Run("NoToken", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run(context.Background(), nil, func(string) string { return "" }, strings.NewReader(""), &out, &errb); code != 2 {
			t.Errorf("run without a token = %d, want 2 (stderr %q)", code, errb.String())
		}
	})
}
