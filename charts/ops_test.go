package charts

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// allOps turns every optional operability object on.
func allOps(t *testing.T) map[string]any {
	t.Helper()
	vals := readValues(t, filepath.Join(chartDir, "ci", "cronjobs-on.yaml"))
	vals["networkPolicy"] = map[string]any{"enabled": true}
	vals["dashboards"] = map[string]any{"enabled": true}
	vals["prometheusRule"] = map[string]any{"enabled": true}
	vals["serviceMonitor"] = map[string]any{"enabled": true}
	return vals
}

func TestChart_Dashboards(t *testing.T) {
	r := render(t, allOps(t))
	exported := exportedMetrics(t)
	var found []string
	for _, m := range r.objects {
		cm, ok := m.obj.(*corev1.ConfigMap)
		if !ok || !strings.Contains(m.name, "-dashboard-") {
			continue
		}
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("%s: labels %v, want grafana_dashboard=1 for the sidecar", m.name, cm.Labels)
		}
		for file, body := range cm.Data {
			found = append(found, file)
			var d struct {
				UID    string `json:"uid"`
				Title  string `json:"title"`
				Panels []struct {
					Title   string `json:"title"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			if err := json.Unmarshal([]byte(body), &d); err != nil {
				t.Fatalf("%s %s: not JSON: %v", m.name, file, err)
			}
			if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
				t.Errorf("%s: uid %q title %q, %d panels", file, d.UID, d.Title, len(d.Panels))
			}
			for _, p := range d.Panels {
				if len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", file, p.Title)
				}
				for _, q := range p.Targets {
					checkExpr(t, file+": "+p.Title, q.Expr, exported)
					if !strings.Contains(q.Expr, `namespace="`+namespace+`"`) {
						t.Errorf("%s: panel %q: query not limited to the release's namespace: %s", file, p.Title, q.Expr)
					}
				}
			}
		}
	}
	slices.Sort(found)
	want := []string{"threatview-databases.json", "threatview-ingest.json", "threatview-pipeline.json", "threatview-retention.json"}
	if !slices.Equal(found, want) {
		t.Errorf("dashboards %v, want %v", found, want)
	}
	if off := render(t, nil); len(off.objects) == len(r.objects) {
		t.Error("dashboards rendered with dashboards.enabled false")
	}
}

// policyFor is the one NetworkPolicy selecting a pod's labels.
func policiesFor(r rendered, podLabels map[string]string) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, m := range r.objects {
		np, ok := m.obj.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err == nil && sel.Matches(labels.Set(podLabels)) {
			out = append(out, np)
		}
	}
	return out
}

func egressPorts(np *networkingv1.NetworkPolicy) []int32 {
	var out []int32
	for _, e := range np.Spec.Egress {
		for _, p := range e.Ports {
			out = append(out, p.Port.IntVal)
		}
	}
	return out
}

func TestChart_NetworkPolicy(t *testing.T) {
	r := render(t, allOps(t))
	for name, pod := range podSpecs(r) {
		nps := policiesFor(r, pod.Labels)
		if len(nps) != 1 {
			t.Errorf("%s: selected by %d NetworkPolicies, want 1", name, len(nps))
			continue
		}
		np := nps[0]
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
			t.Errorf("%s: policy types %v", name, np.Spec.PolicyTypes)
		}
		if !slices.Contains(egressPorts(np), 53) {
			t.Errorf("%s: DNS not allowed", name)
		}
	}
	get := func(comp string) *networkingv1.NetworkPolicy {
		t.Helper()
		m, ok := r.find("NetworkPolicy", release+"-threatview-"+comp)
		if !ok {
			t.Fatalf("no NetworkPolicy for %s", comp)
		}
		return m.obj.(*networkingv1.NetworkPolicy)
	}
	// The collector is public and calls tokens, the audit logger and the broker only.
	col := get("data-collector")
	if len(col.Spec.Ingress) != 1 || len(col.Spec.Ingress[0].From) != 0 {
		t.Errorf("data-collector ingress %+v: want its port open to all", col.Spec.Ingress)
	}
	if got := egressPorts(col); !slices.Equal(got, []int32{53, 53, 8083, 8081, 61613}) {
		t.Errorf("data-collector egress ports %v, want DNS, tokens, audit-logger, broker", got)
	}
	// The processor takes no calls but the admin interface's and Prometheus' scrapes.
	proc := get("data-processor")
	if len(proc.Spec.Ingress) != 1 || len(proc.Spec.Ingress[0].From) != 2 {
		t.Errorf("data-processor ingress %+v: want admin-interface and metricsFrom only", proc.Spec.Ingress)
	} else if proc.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "admin-interface" {
		t.Errorf("data-processor ingress from %+v", proc.Spec.Ingress[0].From[0])
	}
	if got := egressPorts(proc); !slices.Equal(got, []int32{53, 53, 61613, 5432}) {
		t.Errorf("data-processor egress ports %v, want DNS, broker, Postgres", got)
	}
	// Tokens are reached by the collector (and the admin interface), not by the world.
	tok := get("tokens")
	var from []string
	for _, p := range tok.Spec.Ingress[0].From {
		if p.PodSelector != nil {
			from = append(from, p.PodSelector.MatchLabels["app.kubernetes.io/component"])
		}
	}
	if !slices.Equal(from, []string{"data-collector", "admin-interface"}) {
		t.Errorf("tokens ingress from %v", from)
	}
	// The renderer audits its searches: it reaches the audit logger, which takes its calls.
	if got := egressPorts(get("visual-renderer")); !slices.Contains(got, 8081) {
		t.Errorf("visual-renderer egress ports %v, want the audit logger's 8081", got)
	}
	from = nil
	for _, p := range get("audit-logger").Spec.Ingress[0].From {
		if p.PodSelector != nil {
			from = append(from, p.PodSelector.MatchLabels["app.kubernetes.io/component"])
		}
	}
	if !slices.Contains(from, "visual-renderer") {
		t.Errorf("audit-logger ingress from %v, want the visual renderer among them", from)
	}
	// Email reaches the SMTP relay on the port of alerts.smtpAddr.
	vals := allOps(t)
	vals["alerts"] = map[string]any{"smtpAddr": "mail.example.com:587"}
	m, ok := render(t, vals).find("NetworkPolicy", release+"-threatview-alerts")
	if !ok {
		t.Fatal("no NetworkPolicy for alerts")
	}
	if got := egressPorts(m.obj.(*networkingv1.NetworkPolicy)); !slices.Contains(got, 587) {
		t.Errorf("alerts egress ports %v with smtpAddr mail.example.com:587, want 587", got)
	}
	if got := egressPorts(get("alerts")); slices.Contains(got, 587) || slices.Contains(got, 25) {
		t.Errorf("alerts egress ports %v without smtpAddr, want no SMTP port", got)
	}
	if got := egressPorts(get("archiver")); !slices.Contains(got, 443) || !slices.Contains(got, 5432) {
		t.Errorf("archiver egress ports %v, want Postgres and the object store", got)
	}
	if _, ok := r.find("NetworkPolicy", release+"-threatview-test"); !ok {
		t.Error("no NetworkPolicy for the helm test Pod")
	}
}

func TestChart_TopologySpread(t *testing.T) {
	r := render(t, nil)
	for comp, ref := range reference {
		tsc := r.deployment(t, comp).Spec.Template.Spec.TopologySpreadConstraints
		if !ref.scalable {
			if len(tsc) != 0 {
				t.Errorf("%s: single-replica consumer has topology spread constraints", comp)
			}
			continue
		}
		var keys []string
		for _, c := range tsc {
			keys = append(keys, c.TopologyKey)
			if c.LabelSelector == nil || c.LabelSelector.MatchLabels["app.kubernetes.io/component"] != comp || c.MaxSkew != 1 ||
				c.WhenUnsatisfiable != corev1.ScheduleAnyway || !slices.Equal(c.MatchLabelKeys, []string{"pod-template-hash"}) {
				t.Errorf("%s: constraint %+v", comp, c)
			}
		}
		if !slices.Equal(keys, []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}) {
			t.Errorf("%s: topology keys %v", comp, keys)
		}
	}
	off := render(t, map[string]any{"topologySpread": map[string]any{"enabled": false}})
	if n := len(off.deployment(t, "tokens").Spec.Template.Spec.TopologySpreadConstraints); n != 0 {
		t.Errorf("topologySpread.enabled false: tokens has %d constraints", n)
	}
}

func TestChart_HelmTest(t *testing.T) {
	r := render(t, nil)
	m, ok := r.find("Pod", release+"-threatview-test")
	if !ok {
		t.Fatal("no helm test Pod")
	}
	pod := m.obj.(*corev1.Pod)
	if pod.Annotations["helm.sh/hook"] != "test" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("test Pod annotations %v, restartPolicy %s", pod.Annotations, pod.Spec.RestartPolicy)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "threatview/smoketest:0.1.0" {
		t.Errorf("image %s", c.Image)
	}
	env := resolveEnv(t, r, c).values
	if env["SMOKE_COLLECTOR_URL"] != "http://tv-threatview-data-collector:8080" || env["SMOKE_RENDERER_URL"] != "http://tv-threatview-visual-renderer:8086" {
		t.Errorf("test URLs %q %q", env["SMOKE_COLLECTOR_URL"], env["SMOKE_RENDERER_URL"])
	}
	var tokenRef *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == "SMOKE_APP_TOKEN" && e.ValueFrom != nil {
			tokenRef = e.ValueFrom.SecretKeyRef
		}
	}
	if tokenRef == nil || tokenRef.Name != "threatview-helm-test" || tokenRef.Key != "token" {
		t.Errorf("SMOKE_APP_TOKEN from %+v, want Secret threatview-helm-test key token", tokenRef)
	}
	keys, _ := cmdConfigKeys(t, "../deploy/smoketest")
	for _, k := range keys {
		if _, ok := env[k]; !ok && k != "SMOKE_TIMEOUT" {
			t.Errorf("test Pod does not set %s", k)
		}
	}
	off := render(t, map[string]any{"visualRenderer": map[string]any{"enabled": false}})
	if _, ok := off.find("Pod", release+"-threatview-test"); ok {
		t.Error("test Pod rendered without the visual renderer it needs")
	}
}

func TestChart_AdminInterfaceIngress(t *testing.T) {
	r := render(t, map[string]any{"adminInterface": map[string]any{"ingress": map[string]any{"enabled": true, "className": "alb"}}})
	m, ok := r.find("Ingress", release+"-threatview-admin-interface")
	if !ok {
		t.Fatal("no Ingress for the admin interface")
	}
	ing := m.obj.(*networkingv1.Ingress)
	b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
	if b.Name != release+"-threatview-admin-interface" || b.Port.Name != "http" || *ing.Spec.IngressClassName != "alb" {
		t.Errorf("admin Ingress backend %+v class %v", b, ing.Spec.IngressClassName)
	}
	if _, ok := r.find("Ingress", release+"-threatview-data-collector"); ok {
		t.Error("the collector's Ingress rendered although dataCollector.ingress.enabled is false")
	}
	off := render(t, map[string]any{"adminInterface": map[string]any{"enabled": false, "ingress": map[string]any{"enabled": true}}})
	if _, ok := off.find("Ingress", release+"-threatview-admin-interface"); ok {
		t.Error("admin Ingress rendered with the admin interface off")
	}
}

// TestChart_DDLCredentials: with migrations.ddlCredentials on, the migration
// Job and the cleanup connect as the owner users from their own Secret, and
// the services keep their (DML) users.
func TestChart_DDLCredentials(t *testing.T) {
	vals := readValues(t, filepath.Join(chartDir, "ci", "cronjobs-on.yaml"))
	vals["migrations"] = map[string]any{"ddlCredentials": map[string]any{"enabled": true}}
	r := render(t, vals)
	pods := podSpecs(r)
	envOf := func(kind, comp string) map[string]string {
		t.Helper()
		spec, ok := pods[kind+"/"+release+"-threatview-"+comp]
		if !ok {
			t.Fatalf("no %s %s", kind, comp)
		}
		return resolveEnv(t, r, spec.Spec.Containers[0]).values
	}
	secretOf := func(kind, comp, name string) string {
		t.Helper()
		for _, e := range pods[kind+"/"+release+"-threatview-"+comp].Spec.Containers[0].Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		return ""
	}
	mig := envOf("Job", "migrations")
	for k, user := range map[string]string{"EVENTS_DATABASE_URL": "postgres://threatview_owner:", "AUDIT_DATABASE_DSN": "audit_owner:",
		"TOKENS_DATABASE_DSN": "tokens_owner:", "IDENTITY_DATABASE_DSN": "identity_owner:"} {
		if !strings.HasPrefix(mig[k], user) {
			t.Errorf("migrations %s = %q, want the owner user %s", k, mig[k], user)
		}
	}
	if got := secretOf("Job", "migrations", "AUDIT_DATABASE_PASSWORD"); got != "threatview-migrations/audit-password" {
		t.Errorf("migrations audit password from %q", got)
	}
	if c := envOf("CronJob", "cleanup"); !strings.HasPrefix(c["EVENTS_DATABASE_URL"], "postgres://threatview_owner:") {
		t.Errorf("cleanup (drops partitions) connects as %q, want the owner", c["EVENTS_DATABASE_URL"])
	}
	if a := envOf("CronJob", "archiver"); !strings.HasPrefix(a["EVENTS_DATABASE_URL"], "postgres://threatview:") {
		t.Errorf("archiver (reads only) connects as %q, want the services' user", a["EVENTS_DATABASE_URL"])
	}
	if p := envOf("Deployment", "data-processor"); !strings.HasPrefix(p["EVENTS_DATABASE_URL"], "postgres://processor:") {
		t.Errorf("data-processor connects as %q, want its own user", p["EVENTS_DATABASE_URL"])
	}
	if v := envOf("Deployment", "visual-renderer"); !strings.HasPrefix(v["RENDERER_DATABASE_URL"], "postgres://renderer:") {
		t.Errorf("visual-renderer connects as %q, want its read-only user", v["RENDERER_DATABASE_URL"])
	}
	def := render(t, nil)
	pods = podSpecs(def)
	r = def
	if m := envOf("Job", "migrations"); !strings.HasPrefix(m["EVENTS_DATABASE_URL"], "postgres://threatview:") || !strings.HasPrefix(m["IDENTITY_DATABASE_DSN"], "identity:") {
		t.Errorf("by default the migrations use the services' users: %q %q", m["EVENTS_DATABASE_URL"], m["IDENTITY_DATABASE_DSN"])
	}
}
