package upstream

import (
	"errors"
	"strings"
	"testing"

	"threatview/admininterface"
)

func TestParseMetrics(t *testing.T) {
	in := `# HELP collector_http_requests_total HTTP requests.
# TYPE collector_http_requests_total counter
collector_http_requests_total{method="POST",route="/v1/events",status="202"} 40
collector_http_requests_total{method="POST",route="/v1/events",status="401"} 2
collector_http_requests_total{method="GET",route="/healthz",status="200"} 9
collector_build_info{version="1.2.3",note="a \"quoted\", comma"} 1
processor_aggregation_lag_seconds 0.25
go_gc_duration_seconds{quantile="0.5"} 1.5e-05
`
	s, err := ParseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := Sum(s, "collector_http_requests_total", map[string]string{"route": "/v1/events"}); !ok || n != 42 {
		t.Errorf("Sum(route=/v1/events) = %v, %v; want 42", n, ok)
	}
	if n, ok := Sum(s, "processor_aggregation_lag_seconds", nil); !ok || n != 0.25 {
		t.Errorf("Sum(lag) = %v, %v", n, ok)
	}
	if _, ok := Sum(s, "nope", nil); ok {
		t.Error("Sum of a missing metric found something")
	}
	if v := Version(s); v != "1.2.3" {
		t.Errorf("Version = %q", v)
	}
	for _, bad := range []string{"novalue", `m{a="1} 2`, "m{a=1} 2", "m abc"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMetrics(%q) = nil error", bad)
		}
	}
}

func TestStatusError(t *testing.T) {
	cases := []struct {
		status int
		want   error
	}{
		{401, admininterface.ErrUnauthorized}, {403, admininterface.ErrForbidden}, {404, admininterface.ErrNotFound},
		{422, admininterface.ErrInvalid}, {400, admininterface.ErrInvalid}, {503, admininterface.ErrUnavailable}, {500, admininterface.ErrUnavailable},
	}
	for _, c := range cases {
		err := StatusError("svc", c.status, []byte(`{"error":{"code":"x","message":"the reason"}}`))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "the reason") {
			t.Errorf("StatusError(%d) = %v, want %v with the message", c.status, err, c.want)
		}
	}
}
