package httpserver

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// MountSpec serves doc, the service's OpenAPI document (JSON), at
// GET /openapi.json. It touches no dependency and needs no credentials:
// the document describes the API, it grants nothing.
func MountSpec(r chi.Router, doc []byte) {
	r.Get("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		h.Set("Cache-Control", "public, max-age=300")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(doc)
	})
}
