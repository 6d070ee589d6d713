package httpserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecodeJSON(t *testing.T) {
	type body struct {
		Name string `json:"name"`
	}
	plain := func(s string) bool { return s == "colour" }
	for _, tc := range []struct {
		name, in   string
		show       func(string) bool
		ok         bool
		status     int
		code, text string
	}{
		{"OK", `{"name":"a"}`, nil, true, 0, "", ""},
		{"Trailing", `{"name":"a"} {}`, nil, false, 400, "invalid_json", "exactly one"},
		{"NotUTF8", "{\"name\":\"\xff\"}", nil, false, 400, "invalid_json", "UTF-8"},
		{"TooLarge", `{"name":"` + strings.Repeat("a", 100) + `"}`, nil, false, 413, "too_large", "64 bytes"},
		{"WrongType", `{"name":1}`, nil, false, 422, "invalid", "wrong type"},
		{"UnknownShown", `{"colour":1}`, plain, false, 422, "unknown_field", `"colour"`},
		{"UnknownHidden", `{"s3cr3t-Pass":1}`, plain, false, 422, "unknown_field", "unknown field"},
		{"NotObject", `[]`, nil, false, 400, "invalid_json", "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.in))
			var dst body
			if got := DecodeJSON(rec, req, &dst, 64, tc.show); got != tc.ok {
				t.Fatalf("DecodeJSON(%q) = %v, want %v", tc.in, got, tc.ok)
			}
			if tc.ok {
				return
			}
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != tc.status || e.Error.Code != tc.code ||
				!strings.Contains(e.Error.Message, tc.text) {
				t.Fatalf("DecodeJSON(%q) answered %d %s, want %d %s with %q", tc.in, rec.Code, rec.Body, tc.status, tc.code, tc.text)
			}
			if strings.Contains(rec.Body.String(), "s3cr3t") {
				t.Fatalf("the answer repeats a hidden field name: %s", rec.Body)
			}
		})
	}
}
