// Package api holds the OpenAPI 3.1 documents of Threat View's public APIs,
// one per service, embedded so that each service serves its own at
// GET /openapi.json (httpserver.MountSpec) and tests check the running
// services against them (e2e/contract).
//
// The documents are the contract: a change to a route, a status or a body
// starts here. They are edited as JSON, by hand.
package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// The documents. Callers must not modify them.
var (
	//go:embed collector.openapi.json
	Collector []byte
	//go:embed tokens.openapi.json
	Tokens []byte
	//go:embed auditlogger.openapi.json
	AuditLogger []byte
)

// Documents names every document by its service.
func Documents() map[string][]byte {
	return map[string][]byte{
		"collector":   Collector,
		"tokens":      Tokens,
		"auditlogger": AuditLogger,
	}
}

var methods = map[string]bool{
	http.MethodGet: true, http.MethodPut: true, http.MethodPost: true, http.MethodDelete: true,
	http.MethodOptions: true, http.MethodHead: true, http.MethodPatch: true, http.MethodTrace: true,
}

// Operations returns the operations a document declares, as "METHOD /path"
// (path templates as written, e.g. "DELETE /v1/tokens/{id}"), sorted.
func Operations(doc []byte) ([]string, error) {
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode OpenAPI document: %w", err)
	}
	var out []string
	for path, item := range d.Paths {
		for k := range item {
			if m := strings.ToUpper(k); methods[m] {
				out = append(out, m+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
