package webui

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/admininterface/upstream"
)

// metricsTarget serves text as a service's /metrics and answers /readyz.
func metricsTarget(t *testing.T, name, text string) Target {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte(text))
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return Target{Name: name, Client: upstream.New(srv.URL, nil, 5*time.Second)}
}

func brokerMetrics(up, size, age, store float64) string {
	return "# TYPE broker_stats_up gauge\nbroker_stats_up " + num(up) +
		"\n# TYPE broker_queue_size gauge\nbroker_queue_size{queue=\"threatview.events\"} " + num(size) +
		"\n# TYPE broker_queue_oldest_message_age_seconds gauge\nbroker_queue_oldest_message_age_seconds{queue=\"threatview.events\"} " + num(age) +
		"\n# TYPE broker_store_percent_usage gauge\nbroker_store_percent_usage " + num(store) + "\n"
}

func lagMetrics(lag float64) string {
	return "# TYPE processor_aggregation_lag_seconds gauge\nprocessor_aggregation_lag_seconds " + num(lag) + "\n"
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

var cellRe = regexp.MustCompile(`(?s)<tr data-figure="([a-z_]+)"><td>[^<]*</td><td class="([a-z]+)">([^<]*)</td>`)

// backlogCells returns metric → (class, text) of the page's backlog table.
func backlogCells(page string) map[string][2]string {
	out := map[string][2]string{}
	for _, m := range cellRe.FindAllStringSubmatch(page, -1) {
		out[m[1]] = [2]string{m[2], m[3]}
	}
	return out
}

func TestStatusPage_Backlog(t *testing.T) {
	cases := []struct {
		name    string
		targets func(t *testing.T) []Target
		want    map[string][2]string
		warning bool
	}{
		{"calm", func(t *testing.T) []Target {
			return []Target{metricsTarget(t, "collector", brokerMetrics(1, 42, 3, 1.5)), metricsTarget(t, "processor", lagMetrics(2.4))}
		}, map[string][2]string{
			"broker_queue_size":                       {"ok", "42 messages"},
			"broker_queue_oldest_message_age_seconds": {"ok", "3s"},
			"broker_store_percent_usage":              {"ok", "1.5%"},
			"processor_aggregation_lag_seconds":       {"ok", "2s"},
		}, false},
		{"backlog", func(t *testing.T) []Target {
			// Two collector replicas: the larger reading counts.
			return []Target{metricsTarget(t, "collector", brokerMetrics(1, 25000, 900, 82)), metricsTarget(t, "collector-2", brokerMetrics(1, 24000, 800, 81)),
				metricsTarget(t, "processor", lagMetrics(420))}
		}, map[string][2]string{
			"broker_queue_size":                       {"bad", "25000 messages (high)"},
			"broker_queue_oldest_message_age_seconds": {"bad", "15m0s (high)"},
			"broker_store_percent_usage":              {"bad", "82.0% (high)"},
			"processor_aggregation_lag_seconds":       {"bad", "7m0s (high)"},
		}, true},
		{"broker statistics not read", func(t *testing.T) []Target {
			return []Target{metricsTarget(t, "collector", brokerMetrics(0, 0, 0, 0)), metricsTarget(t, "processor", lagMetrics(0))}
		}, map[string][2]string{
			"broker_queue_size":                 {"note", "unknown"},
			"broker_store_percent_usage":        {"note", "unknown"},
			"processor_aggregation_lag_seconds": {"ok", "0s"},
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each page view browses four queues: seconds of waiting, little work
			h := newHarness(t)
			withBroker(t, h)
			h.srv.opts.Targets = c.targets(t)
			b := h.browser(t)
			b.signIn("ada")
			resp, page := b.do("GET", "/status", nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /status = %d", resp.StatusCode)
			}
			got := backlogCells(page)
			if len(got) != 4 {
				t.Fatalf("backlog rows = %v, want 4", got)
			}
			for metric, want := range c.want {
				if got[metric] != want {
					t.Errorf("%s = %q, want %q", metric, got[metric], want)
				}
			}
			if warned := strings.Contains(page, `id="backlog-warning"`); warned != c.warning {
				t.Errorf("warning shown = %v, want %v", warned, c.warning)
			}
		})
	}
}
