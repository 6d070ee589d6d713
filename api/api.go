// Package api holds the OpenAPI 3.1 documents of Threat View's public APIs,
// one per service, embedded so that each service serves its own at
// GET /openapi.json (httpserver.MountSpec) and tests check the running
// services against them (e2e/contract).
//
// The documents are the contract: a change to a route, a status or a body
// starts here. They are edited as JSON, by hand.
package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
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
	// Identity is the identity service's document.
	//go:embed identity.openapi.json
	Identity []byte
	// VisualRenderer is the visual renderer's document.
	//go:embed visualrenderer.openapi.json
	VisualRenderer []byte
	// Alerts is the alerts service's document (rules and SIEM forwarders).
	//go:embed alerts.openapi.json
	Alerts []byte
	// Privacy is the privacy service's document (erasures, suppressions).
	//go:embed privacy.openapi.json
	Privacy []byte
)

// Documents names every document by its service.
func Documents() map[string][]byte {
	return map[string][]byte{
		"collector":   Collector,
		"tokens":      Tokens,
		"auditlogger": AuditLogger,
		"identity":    Identity,
		// The visual renderer's pages answer HTML; its API, JSON.
		"visualrenderer": VisualRenderer,
		"alerts":         Alerts,
		"privacy":        Privacy,
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

// Statuses returns the HTTP statuses an operation ("METHOD /path", as
// Operations names it) documents, sorted; "default" and ranges such as
// "4XX" are left out.
func Statuses(doc []byte, op string) ([]int, error) {
	method, path, ok := strings.Cut(op, " ")
	if !ok {
		return nil, fmt.Errorf("operation %q is not METHOD /path", op)
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode OpenAPI document: %w", err)
	}
	raw, ok := d.Paths[path][strings.ToLower(method)]
	if !ok {
		return nil, fmt.Errorf("no operation %s", op)
	}
	var o struct {
		Responses map[string]json.RawMessage `json:"responses"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("decode %s: %w", op, err)
	}
	var out []int
	for code := range o.Responses {
		if n, err := strconv.Atoi(code); err == nil {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// IsErrorBody reports whether body is exactly the error body every service
// answers with: {"error": {"code", "message", "details"?}}, code and
// message non-empty, nothing else.
func IsErrorBody(body []byte) bool {
	var eb struct {
		Error *struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || dec.More() {
		return false
	}
	return eb.Error != nil && eb.Error.Code != "" && eb.Error.Message != ""
}

// QueryParameters returns the names of the query parameters an operation
// ("METHOD /path") declares, its path item's included.
func QueryParameters(doc []byte, op string) ([]string, error) {
	method, path, ok := strings.Cut(op, " ")
	if !ok {
		return nil, fmt.Errorf("operation %q is not METHOD /path", op)
	}
	type param struct {
		Name string `json:"name"`
		In   string `json:"in"`
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode OpenAPI document: %w", err)
	}
	item, ok := d.Paths[path]
	if !ok || item[strings.ToLower(method)] == nil {
		return nil, fmt.Errorf("no operation %s", op)
	}
	var out []string
	for _, raw := range []json.RawMessage{item["parameters"], item[strings.ToLower(method)]} {
		if raw == nil {
			continue
		}
		var ps []param
		if raw[0] == '{' {
			var o struct {
				Parameters []param `json:"parameters"`
			}
			if err := json.Unmarshal(raw, &o); err != nil {
				return nil, fmt.Errorf("decode %s: %w", op, err)
			}
			ps = o.Parameters
		} else if err := json.Unmarshal(raw, &ps); err != nil {
			return nil, fmt.Errorf("decode %s parameters: %w", path, err)
		}
		for _, p := range ps {
			if p.In == "query" {
				out = append(out, p.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
