package contract

import (
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi/datamodel"

	"threatview/api"
)

// TestDocuments_Valid validates each document against the OpenAPI 3.1
// schema, and checks what the project promises of them: every error answer
// is the JSON error body, every answer with a body has an example, every
// 429 and 503 says Retry-After.
func TestDocuments_Valid(t *testing.T) {
	for name, doc := range api.Documents() {
		t.Run(name, func(t *testing.T) {
			d, err := libopenapi.NewDocument(doc)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if v := d.GetVersion(); v != "3.1.0" {
				t.Errorf("openapi %q, want 3.1.0", v)
			}
			v, errs := validator.NewValidator(d)
			if len(errs) > 0 {
				t.Fatalf("build: %v", errs)
			}
			if ok, verrs := v.ValidateDocument(); !ok {
				for _, e := range verrs {
					t.Errorf("not valid OpenAPI 3.1: %v", e)
				}
			}
			lint(t, doc)
		})
	}
}

type mediaType struct {
	Schema   map[string]any  `json:"schema"`
	Example  json.RawMessage `json:"example"`
	Examples map[string]any  `json:"examples"`
}

type response struct {
	Ref     string               `json:"$ref"`
	Headers map[string]any       `json:"headers"`
	Content map[string]mediaType `json:"content"`
}

func lint(t *testing.T, doc []byte) {
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for p := range d.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		for method, raw := range d.Paths[p] {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string              `json:"operationId"`
				Responses   map[string]response `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, p, err)
			}
			where := strings.ToUpper(method) + " " + p
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
			}
			if len(op.Responses) == 0 {
				t.Errorf("%s documents no response", where)
			}
			for code, r := range op.Responses {
				_, isJSON := r.Content["application/json"]
				apiPath := strings.HasPrefix(p, "/v1/")
				// readyz answers its own body; HTML pages answer text.
				if code >= "400" && p != "/readyz" && (isJSON || apiPath) {
					mt, ok := r.Content["application/json"]
					if !ok || mt.Schema["$ref"] != "#/components/schemas/Error" {
						t.Errorf("%s %s: not the JSON error body", where, code)
					}
				}
				if (code == "429" || (code == "503" && p != "/readyz")) && r.Headers["Retry-After"] == nil {
					t.Errorf("%s %s: no Retry-After header", where, code)
				}
				for ct, mt := range r.Content {
					if ct == "application/json" && mt.Example == nil && mt.Examples == nil && p != "/openapi.json" {
						t.Errorf("%s %s: no example", where, code)
					}
				}
			}
		}
	}
}

// TestDocuments_ValidateCatches checks that the validation sees a broken
// document.
func TestDocuments_ValidateCatches(t *testing.T) {
	broken := strings.Replace(string(api.Collector), `"responses": {`, `"responses": "none", "x": {`, 1)
	// The library logs what it cannot build; the test only wants the verdict.
	quiet := &datamodel.DocumentConfiguration{Logger: slog.New(slog.DiscardHandler)}
	d, err := libopenapi.NewDocumentWithConfiguration([]byte(broken), quiet)
	if err != nil {
		return // refused at parse time: caught
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		return
	}
	if ok, _ := v.ValidateDocument(); ok {
		t.Error("a document whose responses is a string validates")
	}
}
