package httpserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
)

func TestMountSpec(t *testing.T) {
	doc := []byte(`{"openapi":"3.1.0"}`)
	r := chi.NewRouter()
	MountSpec(r, doc)
	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || string(body) != string(doc) {
		t.Errorf("GET /openapi.json = %d %q %s, want 200 application/json and the document", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
