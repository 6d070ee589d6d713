package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/promql/parser"
)

var promql = parser.NewParser(parser.Options{})

// exportedMetrics is every metric name a service registers (Name: "..." or
// the PREFIX_http_* pair of httpserver.Instrument), read from the services'
// sources, so an alert or a dashboard on a misspelt metric fails here.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	nameRe := regexp.MustCompile(`Name:\s*"([a-z_:][a-z0-9_:]*)"`)
	instrumentRe := regexp.MustCompile(`Instrument\(reg, "([a-z]+)"\)`)
	err := filepath.WalkDir("../services", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range nameRe.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		for _, m := range instrumentRe.FindAllSubmatch(b, -1) {
			names[string(m[1])+"_http_requests_total"] = true
			names[string(m[1])+"_http_request_duration_seconds"] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 20 {
		t.Fatalf("only %d metric names found in the services' sources", len(names))
	}
	return names
}

// externalMetrics come from Prometheus itself and kube-state-metrics.
var externalMetrics = map[string]bool{
	"up": true, "kube_job_status_failed": true, "kube_cronjob_status_last_successful_time": true,
}

// checkExpr parses expr with Prometheus' parser and checks that each metric it
// selects by name is one a service exports (histograms by their series names).
func checkExpr(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok || vs.Name == "" {
			return nil
		}
		base := vs.Name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(vs.Name, suffix); ok && exported[b] {
				base = b
			}
		}
		if !exported[base] && !externalMetrics[base] {
			t.Errorf("%s: metric %s is not exported by any service", where, vs.Name)
		}
		return nil
	})
}

// runbookSections are the "### Name" headings under README.md's "## Runbook".
func runbookSections(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Runbook\n")
	if !ok {
		t.Fatal("README.md has no \"## Runbook\" section")
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	var out []string
	for _, line := range strings.Split(after, "\n") {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			out = append(out, strings.TrimSpace(name))
		}
	}
	return out
}

func TestChart_PrometheusRule(t *testing.T) {
	vals := readValues(t, filepath.Join(chartDir, "ci", "cronjobs-on.yaml"))
	vals["prometheusRule"] = map[string]any{"enabled": true, "alertLabels": map[string]any{"team": "ingest"}}
	r := render(t, vals)
	m, ok := r.find("PrometheusRule", release+"-threatview")
	if !ok {
		t.Fatal("no PrometheusRule rendered with prometheusRule.enabled")
	}
	rule := m.obj.(*monitoringv1.PrometheusRule)
	exported := exportedMetrics(t)
	sections := runbookSections(t)
	var alerts []string
	severity := map[string]string{}
	for _, g := range rule.Spec.Groups {
		for _, a := range g.Rules {
			if a.Alert == "" {
				t.Errorf("group %s: a rule without an alert name", g.Name)
				continue
			}
			alerts = append(alerts, a.Alert)
			severity[a.Alert] = a.Labels["severity"]
			checkExpr(t, a.Alert, a.Expr.String(), exported)
			if !strings.Contains(a.Expr.String(), `namespace="`+namespace+`"`) {
				t.Errorf("%s: expression %q is not limited to the release's namespace", a.Alert, a.Expr.String())
			}
			if s := a.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q", a.Alert, s)
			}
			if a.Labels["team"] != "ingest" {
				t.Errorf("%s: alertLabels not applied: %v", a.Alert, a.Labels)
			}
			if a.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", a.Alert)
			}
			if want := "charts/threatview/README.md#" + strings.ToLower(a.Alert); a.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", a.Alert, a.Annotations["runbook_url"], want)
			}
			if !slices.Contains(sections, a.Alert) {
				t.Errorf("%s: no \"### %s\" section in README.md's runbook", a.Alert, a.Alert)
			}
		}
	}
	for _, s := range sections {
		if !slices.Contains(alerts, s) {
			t.Errorf("README.md's runbook has a section %s for no alert", s)
		}
	}
	for _, want := range []string{"ThreatViewCollectorUnavailable", "ThreatViewReceiptTimeouts",
		"ThreatViewDeadLetters", "ThreatViewEventWriteErrors", "ThreatViewAuditWriteErrors", "ThreatViewTokenLookupErrors",
		"ThreatViewRetentionJobFailed", "ThreatViewIngestStalled", "ThreatViewForwardingSkipped",
		"ThreatViewAuditCheckpointRefused", "ThreatViewAuditTrailStoreUnreadable"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
	for alert, want := range map[string]string{"ThreatViewForwardingSkipped": "warning",
		"ThreatViewAuditCheckpointRefused": "critical", "ThreatViewAuditTrailStoreUnreadable": "warning"} {
		if got := severity[alert]; got != want {
			t.Errorf("%s: severity %q, want %s", alert, got, want)
		}
	}
	// The processor folds rollups in its own transaction: the aggregation lag
	// is always 0, an alert on it could never fire.
	if slices.Contains(alerts, "ThreatViewAggregationLag") {
		t.Error("alert ThreatViewAggregationLag rendered: processor_aggregation_lag_seconds is always 0")
	}

	// Without the retention CronJobs, their alerts are left out.
	r = render(t, map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	m, _ = r.find("PrometheusRule", release+"-threatview")
	for _, g := range m.obj.(*monitoringv1.PrometheusRule).Spec.Groups {
		if g.Name == "threatview.retention" {
			t.Error("retention alerts rendered with the CronJobs off")
		}
	}
}

// TestChart_MonitoringNeedsTheAPI: without the Prometheus Operator's CRDs the
// ServiceMonitor and PrometheusRule are left out (an install would be refused
// otherwise) and NOTES.txt says so.
func TestChart_MonitoringNeedsTheAPI(t *testing.T) {
	vals := readValues(t, filepath.Join(chartDir, "values-eks.yaml"))
	vals["prometheusRule"] = map[string]any{"enabled": true}
	with, err := renderValues(loadChart(t), vals)
	if err != nil {
		t.Fatal(err)
	}
	without, err := renderWithAPIs(loadChart(t), vals)
	if err != nil {
		t.Fatal(err)
	}
	all := func(out map[string]string) string {
		var b strings.Builder
		for k, v := range out {
			if !strings.HasSuffix(k, "NOTES.txt") {
				b.WriteString(v)
			}
		}
		return b.String()
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if !strings.Contains(all(with), "kind: "+kind) {
			t.Errorf("%s not rendered although the API is served", kind)
		}
		if strings.Contains(all(without), "kind: "+kind) {
			t.Errorf("%s rendered although the cluster does not serve monitoring.coreos.com/v1", kind)
		}
		if notes := without[chartDir+"/templates/NOTES.txt"]; !strings.Contains(notes, "does not serve\nmonitoring.coreos.com/v1 "+kind) {
			t.Errorf("NOTES.txt does not warn that the %s was left out:\n%s", kind, notes)
		}
	}
}
