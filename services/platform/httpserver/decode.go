package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecodeJSON reads one JSON object of at most limit bytes into dst, refusing
// invalid UTF-8 (encoding/json would turn it into U+FFFD silently), unknown
// fields and trailing data; on failure it has written the JSON error and
// returns false. The body is read as JSON whatever its Content-Type. An
// unknown field's name is repeated in the answer only when showField
// approves it (nil approves every name); error messages never echo the body.
func DecodeJSON(w http.ResponseWriter, r *http.Request, dst any, limit int64, showField func(string) bool) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil && !utf8.Valid(data) {
		WriteError(w, http.StatusBadRequest, "invalid_json", "body is not valid UTF-8", nil)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(dst)
	}
	if err == nil {
		if dec.Decode(&struct{}{}) != io.EOF {
			WriteError(w, http.StatusBadRequest, "invalid_json", "body must hold exactly one JSON object", nil)
			return false
		}
		return true
	}
	var (
		maxErr  *http.MaxBytesError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxErr):
		WriteError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("body is larger than %s", sizeText(limit)), nil)
	case errors.As(err, &typeErr) && typeErr.Field != "":
		WriteError(w, http.StatusUnprocessableEntity, "invalid", "field has the wrong type", map[string]string{"field": typeErr.Field})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		if showField != nil && !showField(field) {
			WriteError(w, http.StatusUnprocessableEntity, "unknown_field", "unknown field", nil)
			return false
		}
		WriteError(w, http.StatusUnprocessableEntity, "unknown_field", "unknown field "+strconv.Quote(field), map[string]string{"field": field})
	default:
		WriteError(w, http.StatusBadRequest, "invalid_json", "body is not a JSON object", nil)
	}
	return false
}

// sizeText writes n bytes as people read it: "16 KiB", "1 MiB", "100 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
