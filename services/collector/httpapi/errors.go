package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"threatview/collector"
	"threatview/platform/httpserver"
)

// errorStatus is the one table from domain errors to HTTP statuses and
// error codes. Order matters only where errors wrap more than one sentinel.
var errorStatus = []struct {
	err    error
	status int
	code   string
}{
	{collector.ErrMalformed, http.StatusBadRequest, "malformed_body"},
	{collector.ErrUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{collector.ErrForbidden, http.StatusForbidden, "forbidden"},
	{collector.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{collector.ErrUnsupportedMediaType, http.StatusUnsupportedMediaType, "unsupported_media_type"},
	{collector.ErrInvalid, http.StatusUnprocessableEntity, "invalid_event"},
	{collector.ErrRateLimited, http.StatusTooManyRequests, "rate_limited"},
	{collector.ErrOverloaded, http.StatusServiceUnavailable, "overloaded"},
	{collector.ErrUnconfirmed, http.StatusServiceUnavailable, "outcome_unknown"},
	{collector.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

// retryError carries how long a client should wait (429).
type retryError struct {
	err   error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// RetryAfter is the wait the client is told.
func (e *retryError) RetryAfter() time.Duration { return e.after }

// fieldDetails is the details object of a validation error.
type fieldDetails struct {
	Index *int   `json:"index,omitempty"`
	Field string `json:"field,omitempty"`
}

// writeError answers err with the status of its sentinel and the JSON error
// body, and returns the error code (the rejection reason for metrics).
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) string {
	for _, e := range errorStatus {
		if !errors.Is(err, e.err) {
			continue
		}
		msg := err.Error()
		var details any
		var fe *collector.FieldError
		if errors.As(err, &fe) {
			d := fieldDetails{Field: fe.Field}
			if fe.Index >= 0 {
				idx := fe.Index
				d.Index = &idx
			}
			details = d
		}
		switch e.status {
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="threatview"`)
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			after := a.retryAfter
			var re interface{ RetryAfter() time.Duration } // *retryError, a token lookup cap's error
			if errors.As(err, &re) && re.RetryAfter() > after {
				after = re.RetryAfter()
			}
			w.Header().Set("Retry-After", strconv.Itoa(int((after+time.Second-1)/time.Second)))
			if e.status == http.StatusServiceUnavailable {
				// The cause (broker address, audit logger answer) is for
				// the log, not the client.
				a.log.Warn("request not accepted", "request_id", w.Header().Get("X-Request-ID"), "err", err)
				msg = "the collector cannot make events durable right now; retry later"
				switch {
				case errors.Is(err, collector.ErrOverloaded):
					msg = "too many requests in flight; retry later"
				case errors.Is(err, collector.ErrUnconfirmed):
					msg = "the broker did not confirm in time: the events may or may not have been kept; retry with the same event_id values or Idempotency-Key"
				}
			}
		}
		httpserver.WriteError(w, e.status, e.code, msg, details)
		return e.code
	}
	a.log.Error("request failed", "request_id", w.Header().Get("X-Request-ID"), "path", r.URL.Path, "err", err)
	httpserver.WriteError(w, http.StatusInternalServerError, "internal", "internal error", nil)
	return "internal"
}
