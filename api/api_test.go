package api

import (
	"slices"
	"testing"
)

func TestOperations(t *testing.T) {
	for name, doc := range Documents() {
		ops, err := Operations(doc)
		if err != nil {
			t.Fatalf("Operations(%s) = %v", name, err)
		}
		want := []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.json"}
		for _, want := range want {
			if !slices.Contains(ops, want) {
				t.Errorf("%s declares %v, want %q among them", name, ops, want)
			}
		}
	}
	if _, err := Operations([]byte("{")); err == nil {
		t.Error("Operations(truncated JSON) = nil error")
	}
}

func TestStatuses(t *testing.T) {
	got, err := Statuses(Collector, "POST /v1/events")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{202, 400, 401, 403, 413, 415, 422, 429, 503} {
		if !slices.Contains(got, want) {
			t.Errorf("Statuses(POST /v1/events) = %v, want %d among them", got, want)
		}
	}
	if _, err := Statuses(Collector, "GET /v1/events"); err == nil {
		t.Error("Statuses(an undocumented operation) = nil error")
	}
}

func TestIsErrorBody(t *testing.T) {
	for body, want := range map[string]bool{
		`{"error":{"code":"x","message":"y"}}`:                   true,
		`{"error":{"code":"x","message":"y","details":{"i":1}}}`: true,
		`{"error":{"code":"x"}}`:                                 false,
		`{"error":{"code":"x","message":"y"},"extra":1}`:         false,
		`{"error":"x"}`: false,
		`not json`:      false,
	} {
		if got := IsErrorBody([]byte(body)); got != want {
			t.Errorf("IsErrorBody(%s) = %v, want %v", body, got, want)
		}
	}
}

func TestQueryParameters(t *testing.T) {
	got, err := QueryParameters(AuditLogger, "GET /v1/audit")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"action", "actor", "app_id", "cursor", "from", "limit", "to"}; !slices.Equal(got, want) {
		t.Errorf("QueryParameters(GET /v1/audit) = %v, want %v", got, want)
	}
	if got, err := QueryParameters(Tokens, "DELETE /v1/tokens/{id}"); err != nil || len(got) != 0 {
		t.Errorf("QueryParameters(DELETE /v1/tokens/{id}) = %v, %v; want none", got, err)
	}
}
