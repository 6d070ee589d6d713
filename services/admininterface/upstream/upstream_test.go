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
	hist := `# TYPE h_seconds histogram
h_seconds_bucket{route="/v1/events",le="0.1"} 3
h_seconds_bucket{route="/v1/events",le="+Inf"} 5
h_seconds_sum{route="/v1/events"} 0.75
h_seconds_count{route="/v1/events"} 5
# TYPE s summary
s{quantile="0.99"} 7
s_sum 9
s_count 2
`
	hs, err := ParseMetrics(strings.NewReader(hist))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"h_seconds_bucket", map[string]string{"le": "+Inf"}, 5}, {"h_seconds_bucket", map[string]string{"le": "0.1"}, 3},
		{"h_seconds_count", map[string]string{"route": "/v1/events"}, 5}, {"h_seconds_sum", nil, 0.75},
		{"s", map[string]string{"quantile": "0.99"}, 7}, {"s_count", nil, 2},
	} {
		if n, ok := Sum(hs, c.name, c.match); !ok || n != c.want {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v", c.name, c.match, n, ok, c.want)
		}
	}
	for _, bad := range []string{"novalue", `m{a="1} 2`, "m{a=1} 2", "m abc", "# TYPE m counter\n# TYPE m gauge\nm 1\n"} {
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
