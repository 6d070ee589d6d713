package visualrenderer_test

import (
	"net/url"
	"testing"
	"time"

	"threatview/visualrenderer"
)

func TestTaxonomy_Select(t *testing.T) {
	tax := visualrenderer.Taxonomy{
		"Hooks":        {Type: "Hooks", Category: "anti-dynamic-analysis", Severity: "critical"},
		"Debug":        {Type: "Debug", Category: "anti-dynamic-analysis", Severity: "high"},
		"Custom":       {Type: "Custom", Category: "other", Severity: "low"},
		"AppIntegrity": {Type: "AppIntegrity", Category: "anti-tampering", Severity: "high"},
	}
	for _, tc := range []struct {
		name  string
		match map[string]bool
	}{
		{"Hooks", map[string]bool{"Hooks": true, "Debug": false, "unknown": false}},
		{"anti-dynamic-analysis", map[string]bool{"Hooks": true, "Debug": true, "AppIntegrity": false, "unknown": false}},
		{"other", map[string]bool{"Custom": true, "never-listed": true, "Hooks": false}},
	} {
		sel := tax.Select(tc.name)
		for threat, want := range tc.match {
			if got := sel.Match(threat); got != want {
				t.Errorf("Select(%q).Match(%q) = %v, want %v", tc.name, threat, got, want)
			}
		}
	}
}

func TestParseRollupQuery(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 4, 5, 0, time.UTC)
	q, err := visualrenderer.ParseRollupQuery(url.Values{}, now)
	if err != nil || !q.From.Equal(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)) || !q.To.Equal(q.From.Add(24*time.Hour)) || q.K != 5 {
		t.Errorf("ParseRollupQuery(default) = %+v, %v; want today, K 5", q, err)
	}
	q, err = visualrenderer.ParseRollupQuery(url.Values{"from": {"2026-11-26"}, "to": {"2026-12-03T10:00:00Z"}}, now)
	if err != nil || !q.To.Equal(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseRollupQuery(7 days) = %+v, %v; want to rounded up to 2026-12-04", q, err)
	}
}
