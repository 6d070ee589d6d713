package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"threatview/collector"
	"threatview/collector/httpapi"
)

func TestPostEvents_IdempotencyKey(t *testing.T) {
	const own = "0190f0a8-1234-7abc-8def-0123456789ab"
	body := `{"events":[{"type":"t","app":{"id":"app1"}},{"type":"t","app":{"id":"app1"},"event_id":"` + own + `"},{"type":"t","app":{"id":"app1"}}]}`
	f := newFixture(t, nil)
	ids := func(t *testing.T, key string) []string {
		t.Helper()
		req := post(body)
		if key != "" {
			req = req.with("Idempotency-Key", key)
		}
		w := f.do(t, req)
		if w.Code != http.StatusAccepted {
			t.Fatalf("status = %d %s, want 202", w.Code, w.Body)
		}
		var a accepted
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || len(a.IDs) != 3 {
			t.Fatalf("body = %s", w.Body)
		}
		return a.IDs
	}
	t.Run("OK", func(t *testing.T) {
		first, again := ids(t, "order-42:try"), ids(t, "order-42:try")
		if strings.Join(first, ",") != strings.Join(again, ",") {
			t.Fatalf("ids with the same key = %v then %v, want the same", first, again)
		}
		if first[1] != own {
			t.Fatalf("id of the event with event_id = %s, want %s", first[1], own)
		}
		if first[0] == first[2] || first[0] != httpapi.DeriveEventID("app1", "order-42:try", 0).String() {
			t.Fatalf("derived ids = %v", first)
		}
		other := ids(t, "order-43")
		if other[0] == first[0] || other[2] == first[2] {
			t.Fatalf("ids with another key = %v, want new ones (first %v)", other, first)
		}
	})
	t.Run("NoKey", func(t *testing.T) {
		a, b := ids(t, ""), ids(t, "")
		if a[0] == b[0] {
			t.Fatalf("two requests without a key got the same id %s", a[0])
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, key := range []string{strings.Repeat("k", 129), "has space", "é"} {
			w := f.do(t, post(body).with("Idempotency-Key", key))
			if w.Code != http.StatusUnprocessableEntity {
				t.Fatalf("Idempotency-Key %q: status = %d, want 422", key, w.Code)
			}
			errorBody(t, w)
		}
	})
}

// A request whose events the broker never confirmed is told so: 503
// outcome_unknown, distinct from unavailable (nothing kept).
func TestPostEvents_Unconfirmed(t *testing.T) {
	f := newFixture(t, nil)
	f.events.fail = fmt.Errorf("%w: no receipt in time", collector.ErrUnconfirmed)
	w := f.do(t, post(`{"type":"t","app":{"id":"app1"}}`))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("status = %d, want 503 with Retry-After", w.Code)
	}
	if e := errorBody(t, w); e.Code != "outcome_unknown" {
		t.Fatalf("error = %+v, want code outcome_unknown", e)
	}
}
