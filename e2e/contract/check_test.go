package contract

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/content"

	"threatview/api"
)

// spec validates real requests and answers of one service against its
// OpenAPI document, and records which operations and statuses were seen.
type spec struct {
	name string
	doc  []byte
	ops  []string // "METHOD /template"

	mu sync.Mutex // the validator is not documented as safe for concurrent use
	v  validator.Validator
	// seen: operation → status → times validated.
	seen map[string]map[int]int
}

var (
	specsMu sync.Mutex
	specs   = map[string]*spec{}
)

// specFor returns the checker of a service's document (one per test binary).
func specFor(tb testing.TB, name string) *spec {
	tb.Helper()
	specsMu.Lock()
	defer specsMu.Unlock()
	if s, ok := specs[name]; ok {
		return s
	}
	doc, ok := api.Documents()[name]
	if !ok {
		tb.Fatalf("no OpenAPI document for %s", name)
	}
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		tb.Fatalf("%s: parse OpenAPI document: %v", name, err)
	}
	// Formats (date-time, uuid) are asserted; a body of a media type the
	// operation does not declare is refused.
	v, errs := validator.NewValidator(d, config.WithFormatAssertions(), config.WithStandardBodyDecoders(),
		config.WithBodyDecoder("image/*", content.BinaryDecoder()), config.WithRejectUnsupportedBodyContent())
	if len(errs) > 0 {
		tb.Fatalf("%s: build validator: %v", name, errs)
	}
	ops, err := api.Operations(doc)
	if err != nil {
		tb.Fatal(err)
	}
	s := &spec{name: name, doc: doc, ops: ops, v: v, seen: map[string]map[int]int{}}
	specs[name] = s
	return s
}

// operation names the documented operation serving method and path, or "".
func (s *spec) operation(method, path string) string {
	for _, op := range s.ops {
		m, tmpl, _ := strings.Cut(op, " ")
		if m == method && matchTemplate(tmpl, path) {
			return op
		}
	}
	return ""
}

func matchTemplate(tmpl, path string) bool {
	a, b := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.HasPrefix(a[i], "{") && strings.HasSuffix(a[i], "}") {
			if b[i] == "" {
				return false
			}
			continue
		}
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// plain returns a copy of req with body as given, decompressed when req
// says gzip, for the validator (which reads JSON bodies).
func plain(req *http.Request, body []byte) (*http.Request, error) {
	r := req.Clone(req.Context())
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
		r.Header.Del("Content-Encoding")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return r, nil
}

// checkRequest returns the validator's complaints about a request (nil
// when the document allows it).
func (s *spec) checkRequest(req *http.Request, body []byte) []string {
	r, err := plain(req, body)
	if err != nil {
		return []string{err.Error()}
	}
	s.mu.Lock()
	ok, errs := s.v.ValidateHttpRequestSync(r)
	s.mu.Unlock()
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	if !ok && len(out) == 0 {
		out = append(out, "refused")
	}
	// OpenAPI cannot say "no other query parameters"; the services refuse
	// unknown ones, so the check does too.
	if op := s.operation(req.Method, req.URL.Path); op != "" {
		declared, err := api.QueryParameters(s.doc, op)
		if err != nil {
			out = append(out, err.Error())
		}
		for k := range req.URL.Query() {
			if !slices.Contains(declared, k) {
				out = append(out, fmt.Sprintf("query parameter %q is not declared", k))
			}
		}
	}
	return out
}

// checkResponse validates an answer to req (bodies already read) and
// records it. It returns what the document does not allow. An answer to
// an undocumented operation must be the JSON error body (404 or 405).
func (s *spec) checkResponse(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) []string {
	op := s.operation(req.Method, req.URL.Path)
	if op == "" {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return []string{fmt.Sprintf("%s %s is not documented but answered %d", req.Method, req.URL.Path, status)}
		}
		if !isErrorBody(header, body) {
			return []string{fmt.Sprintf("%s %s: %d without the JSON error body: %.200s", req.Method, req.URL.Path, status, body)}
		}
		return nil
	}
	r, err := plain(req, reqBody)
	if err != nil {
		return []string{err.Error()}
	}
	resp := &http.Response{StatusCode: status, Header: header.Clone(), Body: io.NopCloser(bytes.NewReader(body)), Request: r}
	if resp.Header.Get("Content-Type") == "" && len(body) == 0 {
		// The validator wants a media type even for an empty body (204).
		resp.Header.Set("Content-Type", "application/json")
	}
	s.mu.Lock()
	ok, errs := s.v.ValidateHttpResponse(r, resp)
	if s.seen[op] == nil {
		s.seen[op] = map[int]int{}
	}
	s.seen[op][status]++
	s.mu.Unlock()
	var out []string
	if !ok {
		for _, e := range errs {
			out = append(out, e.Error())
		}
	}
	if !s.documents(op, status) {
		out = append(out, fmt.Sprintf("%s: status %d is not documented", op, status))
	}
	if status >= 400 && !isErrorBody(header, body) {
		out = append(out, fmt.Sprintf("%s: %d without the JSON error body: %.200s", op, status, body))
	}
	return out
}

// documents reports whether op lists status among its responses.
func (s *spec) documents(op string, status int) bool {
	statuses, err := api.Statuses(s.doc, op)
	if err != nil {
		return false
	}
	for _, st := range statuses {
		if st == status {
			return true
		}
	}
	return false
}

// isErrorBody reports whether body is {"error":{"code","message",...}}.
func isErrorBody(header http.Header, body []byte) bool {
	if !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		return false
	}
	return api.IsErrorBody(body)
}

// report lists what was validated, per operation and status.
func (s *spec) report() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lines []string
	for _, op := range s.ops {
		var st []string
		for code, n := range s.seen[op] {
			st = append(st, fmt.Sprintf("%d×%d", code, n))
		}
		sort.Strings(st)
		lines = append(lines, fmt.Sprintf("  %-28s %s", op, strings.Join(st, " ")))
	}
	return s.name + ":\n" + strings.Join(lines, "\n")
}

// unexercised lists the operations never answered with a 2xx.
func (s *spec) unexercised() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, op := range s.ops {
		ok := false
		for code := range s.seen[op] {
			if code >= 200 && code < 300 {
				ok = true
			}
		}
		if !ok {
			out = append(out, op)
		}
	}
	return out
}

// transport validates every request it carries and every answer against
// a document; the failures go to t.Errorf. Requests the document does not
// allow are sent anyway (a test may mean it): wantValid says which to
// flag.
type transport struct {
	t         testing.TB
	spec      *spec
	base      http.RoundTripper
	wantValid bool
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	if tr.wantValid && tr.spec.operation(req.Method, req.URL.Path) != "" {
		if errs := tr.spec.checkRequest(req, body); errs != nil {
			tr.t.Errorf("%s: request %s %s is not allowed by the document: %v", tr.spec.name, req.Method, req.URL.Path, errs)
		}
	}
	base := tr.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	if errs := tr.spec.checkResponse(req, body, resp.StatusCode, resp.Header, rb); errs != nil {
		tr.t.Errorf("%s: answer %d to %s %s is not what the document says: %v", tr.spec.name, resp.StatusCode, req.Method, req.URL.Path, errs)
	}
	return resp, nil
}
