package contract

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi-validator/helpers"

	"threatview/api"
)

// TestDocuments_ExamplesValid validates every JSON response example of
// every document against the schema of its response, so an example shows
// what a client really receives.
func TestDocuments_ExamplesValid(t *testing.T) {
	for name, doc := range api.Documents() {
		t.Run(name, func(t *testing.T) {
			s := specFor(t, name)
			n := 0
			for _, ex := range responseExamples(t, doc) {
				n++
				for _, e := range s.validateExample(ex) {
					t.Errorf("%s %s %d, example %s: %s", ex.method, ex.path, ex.status, ex.name, e)
				}
			}
			if n == 0 {
				t.Error("no response example found: the walk is not reading the document")
			}
		})
	}
}

// TestDocuments_ExamplesValidCatches checks that a wrong example is seen.
func TestDocuments_ExamplesValidCatches(t *testing.T) {
	s := specFor(t, "auditlogger")
	for _, body := range []string{
		`{"keys":"none"}`,
		`{"keys":[{"key_id":1}]}`,
	} {
		ex := example{method: "GET", path: "/v1/audit/keys", status: 200, name: "broken", value: []byte(body)}
		if errs := s.validateExample(ex); len(errs) == 0 {
			t.Errorf("the example %s of GET /v1/audit/keys 200 validates", body)
		}
	}
}

type example struct {
	method, path, name string
	status             int
	value              json.RawMessage
}

// responseExamples lists the application/json response examples of doc.
func responseExamples(t *testing.T, doc []byte) []example {
	t.Helper()
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var out []example
	for p, ops := range d.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				Responses map[string]struct {
					Content map[string]struct {
						Example  json.RawMessage `json:"example"`
						Examples map[string]struct {
							Value json.RawMessage `json:"value"`
						} `json:"examples"`
					} `json:"content"`
				} `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, p, err)
			}
			for code, r := range op.Responses {
				status, err := strconv.Atoi(code)
				mt, ok := r.Content["application/json"]
				if err != nil || !ok {
					continue
				}
				ex := example{method: strings.ToUpper(method), path: p, status: status}
				if mt.Example != nil {
					ex.name, ex.value = "example", mt.Example
					out = append(out, ex)
				}
				for name, e := range mt.Examples {
					ex.name, ex.value = name, e.Value
					out = append(out, ex)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.path+a.method+strconv.Itoa(a.status)+a.name < b.path+b.method+strconv.Itoa(b.status)+b.name
	})
	return out
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// validateExample validates one example as the body of its answer. It does
// not count as an answer seen (spec.seen): the conformance tests' coverage
// is of the running services only.
func (s *spec) validateExample(ex example) []string {
	path := pathParam.ReplaceAllString(ex.path, "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c")
	req, err := http.NewRequest(ex.method, "http://127.0.0.1"+path, nil)
	if err != nil {
		return []string{err.Error()}
	}
	header := http.Header{"Content-Type": {"application/json"}}
	resp := &http.Response{StatusCode: ex.status, Header: header, Body: io.NopCloser(bytes.NewReader(ex.value)), Request: req}
	s.mu.Lock()
	ok, errs := s.v.ValidateHttpResponse(req, resp)
	s.mu.Unlock()
	if ok {
		return nil
	}
	var out []string
	for _, e := range errs {
		// Headers (Retry-After, WWW-Authenticate) are not part of an example.
		if e.ValidationSubType == helpers.ParameterValidationHeader {
			continue
		}
		msg := e.Error()
		for _, sv := range e.SchemaValidationErrors {
			msg += "; " + sv.FieldPath + ": " + sv.Reason
		}
		out = append(out, msg)
	}
	return out
}
