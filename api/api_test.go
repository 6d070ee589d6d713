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
		for _, want := range []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.json"} {
			if !slices.Contains(ops, want) {
				t.Errorf("%s declares %v, want %q among them", name, ops, want)
			}
		}
	}
	if _, err := Operations([]byte("{")); err == nil {
		t.Error("Operations(truncated JSON) = nil error")
	}
}
