package charts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "threatview"
	release   = "tv"
	namespace = "threatview"
)

// kubeVersion is the cluster version the chart is linted and rendered for
// (Chart.yaml asks for 1.30 or later).
var kubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}

// reference is the reference deployment's sizing: the chart's defaults.
var reference = map[string]struct {
	replicas int32
	cpu      string
	memory   string
	scalable bool
}{
	"data-collector":      {2, "1", "760Mi", true},
	"audit-logger":        {2, "1", "760Mi", true},
	"tokens":              {2, "1", "760Mi", true},
	"data-processor":      {1, "3", "1024Mi", false},
	"audit-logger-worker": {1, "1", "760Mi", false},
	"identity":            {2, "1", "760Mi", true},
	"visual-renderer":     {2, "1", "760Mi", true},
	"admin-interface":     {2, "500m", "128Mi", true},
}

// beyondReference are services the reference deployment did not have: their
// requests are the chart's own and are not part of the reference's totals.
var beyondReference = map[string]bool{"privacy": true, "alerts": true}

// trailStore is the values file with the checkpoint store a set that names
// none is given: with the audit trail on (the default) the chart refuses to
// render without one (TestChart_AuditTrailNeedsExternalStore).
var trailStore = filepath.Join("testdata", "trail-store.yaml")

// hasTrailStore tells whether vals choose a checkpoint store or turn the
// trail off.
func hasTrailStore(vals map[string]any) bool {
	t, _ := vals["auditTrail"].(map[string]any)
	s3, _ := t["s3"].(map[string]any)
	return t["enabled"] == false || s3["enabled"] == true || (t["dir"] != nil && t["volume"] != nil)
}

// valueSets are the values files the chart must lint and render with: the
// defaults, every ci/*.yaml and the EKS example, each with trailStore first
// when it names no checkpoint store.
func valueSets(t *testing.T) map[string][]string {
	t.Helper()
	sets := map[string][]string{"defaults": nil}
	defer func() {
		for name, files := range sets {
			if !hasTrailStore(readValues(t, files...)) {
				sets[name] = append([]string{trailStore}, files...)
			}
		}
	}()
	ci, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ci) < 4 {
		t.Fatalf("ci/*.yaml: %d files, want at least 4 (cost override, autoscaling off, auditing off, CronJobs on)", len(ci))
	}
	for _, f := range ci {
		sets[filepath.Base(f)] = []string{f}
	}
	sets["values-eks.yaml"] = []string{filepath.Join(chartDir, "values-eks.yaml")}
	return sets
}

// manifest is one rendered object, decoded strictly into its k8s.io/api type.
type manifest struct {
	source string
	raw    string
	kind   string
	name   string
	obj    any
}

// rendered is the chart rendered with one set of values.
type rendered struct {
	objects []manifest
}

func (r rendered) find(kind, name string) (manifest, bool) {
	for _, m := range r.objects {
		if m.kind == kind && m.name == name {
			return m, true
		}
	}
	return manifest{}, false
}

func (r rendered) deployment(t *testing.T, component string) *appsv1.Deployment {
	t.Helper()
	m, ok := r.find("Deployment", release+"-threatview-"+component)
	if !ok {
		t.Fatalf("no Deployment for %s", component)
	}
	return m.obj.(*appsv1.Deployment)
}

func (r rendered) hpa(component string) *autoscalingv2.HorizontalPodAutoscaler {
	m, ok := r.find("HorizontalPodAutoscaler", release+"-threatview-"+component)
	if !ok {
		return nil
	}
	return m.obj.(*autoscalingv2.HorizontalPodAutoscaler)
}

func (r rendered) configMap(name string) (*corev1.ConfigMap, bool) {
	m, ok := r.find("ConfigMap", name)
	if !ok {
		return nil, false
	}
	return m.obj.(*corev1.ConfigMap), true
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// readValues merges values files left to right, like `helm -f a -f b`.
func readValues(t *testing.T, files ...string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		out = mergeMaps(out, v)
	}
	return out
}

func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bv, ok := v.(map[string]any); ok {
			if av, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(av, bv)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// renderValues renders the chart as `helm install` would, schema validation
// included, and returns the error instead of failing. Values that name no
// checkpoint store get trailStore's.
func renderValues(c *chart.Chart, vals map[string]any) (map[string]string, error) {
	if !hasTrailStore(vals) {
		v, err := chartutil.ReadValuesFile(trailStore)
		if err != nil {
			return nil, err
		}
		vals = mergeMaps(v, vals)
	}
	return renderWithAPIs(c, vals, monitoringAPIs...)
}

// monitoringAPIs are what a cluster with the Prometheus Operator's CRDs serves.
var monitoringAPIs = []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// renderWithAPIs renders for a cluster serving Kubernetes' own APIs plus extra.
func renderWithAPIs(c *chart.Chart, vals map[string]any, extra ...string) (map[string]string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	caps.APIVersions = append(slices.Clone(caps.APIVersions), extra...)
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: release, Namespace: namespace, IsInstall: true, Revision: 1,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// render renders the chart with vals and decodes every object strictly.
func render(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	out, err := renderValues(loadChart(t), vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	var r rendered
	for _, src := range names {
		if strings.HasSuffix(src, "NOTES.txt") {
			if strings.TrimSpace(out[src]) == "" {
				t.Errorf("%s is empty", src)
			}
			continue
		}
		for _, doc := range docSep.Split(out[src], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			r.objects = append(r.objects, decodeStrict(t, src, doc))
		}
	}
	return r
}

// decodeStrict decodes doc into the k8s.io/api type of its kind; unknown or
// duplicate fields and wrong types fail the test.
func decodeStrict(t *testing.T, src, doc string) manifest {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
		t.Fatalf("%s: not YAML: %v\n%s", src, err, doc)
	}
	var obj any
	switch meta.APIVersion + "/" + meta.Kind {
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		obj = &autoscalingv2.HorizontalPodAutoscaler{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "batch/v1/Job":
		obj = &batchv1.Job{}
	case "batch/v1/CronJob":
		obj = &batchv1.CronJob{}
	case "networking.k8s.io/v1/Ingress":
		obj = &networkingv1.Ingress{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		decodeServiceMonitor(t, src, doc)
		obj = &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		obj = &monitoringv1.PrometheusRule{}
	case "networking.k8s.io/v1/NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "v1/Pod":
		obj = &corev1.Pod{}
	default:
		t.Fatalf("%s: unexpected object %s %s", src, meta.APIVersion, meta.Kind)
	}
	if _, ok := obj.(map[string]any); !ok {
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %s %s does not decode strictly: %v\n%s", src, meta.Kind, meta.Metadata.Name, err, doc)
		}
	}
	if meta.Metadata.Name == "" || len(meta.Metadata.Name) > 63 {
		t.Errorf("%s: %s name %q: want 1 to 63 characters", src, meta.Kind, meta.Metadata.Name)
	}
	return manifest{source: src, raw: doc, kind: meta.Kind, name: meta.Metadata.Name, obj: obj}
}

// decodeServiceMonitor checks a ServiceMonitor (no k8s.io/api type) by hand:
// known fields only, a selector and endpoints naming a port.
func decodeServiceMonitor(t *testing.T, src, doc string) map[string]any {
	t.Helper()
	var sm map[string]any
	if err := yaml.UnmarshalStrict([]byte(doc), &sm); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	onlyKeys(t, src, sm, "apiVersion", "kind", "metadata", "spec")
	spec, _ := sm["spec"].(map[string]any)
	if spec == nil {
		t.Fatalf("%s: ServiceMonitor without spec", src)
	}
	onlyKeys(t, src+" spec", spec, "selector", "endpoints", "namespaceSelector", "jobLabel")
	sel, _ := spec["selector"].(map[string]any)
	if ml, _ := sel["matchLabels"].(map[string]any); len(ml) == 0 {
		t.Errorf("%s: ServiceMonitor spec.selector.matchLabels is empty", src)
	}
	eps, _ := spec["endpoints"].([]any)
	if len(eps) == 0 {
		t.Fatalf("%s: ServiceMonitor has no endpoints", src)
	}
	for _, e := range eps {
		ep, _ := e.(map[string]any)
		onlyKeys(t, src+" endpoint", ep, "port", "path", "interval", "scrapeTimeout", "scheme", "honorLabels")
		if ep["port"] != "http" || ep["path"] != "/metrics" {
			t.Errorf("%s: endpoint %v: want port http, path /metrics", src, ep)
		}
	}
	return sm
}

func onlyKeys(t *testing.T, where string, m map[string]any, allowed ...string) {
	t.Helper()
	for k := range m {
		if !slices.Contains(allowed, k) {
			t.Errorf("%s: unknown field %q", where, k)
		}
	}
}

func TestChart_Lint(t *testing.T) {
	for name, files := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			res := lint.AllWithKubeVersion(chartDir, readValues(t, files...), namespace, &kubeVersion)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
		})
	}
}

// podSpecs lists the pod templates of the workloads in r.
func podSpecs(r rendered) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, m := range r.objects {
		switch o := m.obj.(type) {
		case *appsv1.Deployment:
			out["Deployment/"+m.name] = &o.Spec.Template
		case *batchv1.Job:
			out["Job/"+m.name] = &o.Spec.Template
		case *batchv1.CronJob:
			out["CronJob/"+m.name] = &o.Spec.JobTemplate.Spec.Template
		case *corev1.Pod:
			out["Pod/"+m.name] = &corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}
		}
	}
	return out
}

func TestChart_Render(t *testing.T) {
	for name, files := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, readValues(t, files...))
			checkWorkloads(t, r)
			checkPinned(t, r)
			checkSelectors(t, r)
		})
	}
}

// checkWorkloads checks what every pod must have: non-root, read-only root,
// no capabilities, GOMAXPROCS/GOMEMLIMIT from limits that are set, probes and
// graceful termination on the services, registry-less images.
func checkWorkloads(t *testing.T, r rendered) {
	t.Helper()
	for name, pod := range podSpecs(r) {
		ps := pod.Spec.SecurityContext
		if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 ||
			ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod securityContext %+v: want non-root uid and RuntimeDefault seccomp", name, ps)
		}
		if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
			t.Errorf("%s: automountServiceAccountToken: want false", name)
		}
		if len(pod.Spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", name, len(pod.Spec.Containers))
		}
		c := pod.Spec.Containers[0]
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s: container securityContext %+v: want read-only root, no escalation, drop ALL", name, sc)
		}
		if first, _, _ := strings.Cut(c.Image, "/"); strings.ContainsAny(first, ".:") || first == "localhost" {
			t.Errorf("%s: image %q names a registry host", name, c.Image)
		}
		runtime := map[string]string{"GOMAXPROCS": "limits.cpu", "GOMEMLIMIT": "limits.memory"}
		for _, e := range c.Env {
			want, ok := runtime[e.Name]
			if !ok {
				continue
			}
			delete(runtime, e.Name)
			if e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != want {
				t.Errorf("%s: %s = %+v: want resourceFieldRef %s", name, e.Name, e.ValueFrom, want)
				continue
			}
			if d := e.ValueFrom.ResourceFieldRef.Divisor; d.Cmp(resource.MustParse("1")) != 0 {
				t.Errorf("%s: %s divisor %s, want 1 (whole CPUs, bytes)", name, e.Name, d.String())
			}
			res := corev1.ResourceName(strings.TrimPrefix(want, "limits."))
			if _, ok := c.Resources.Limits[res]; !ok {
				t.Errorf("%s: %s follows %s but the container sets no such limit", name, e.Name, want)
			}
		}
		if len(runtime) != 0 {
			t.Errorf("%s: missing %v", name, runtime)
		}
		if !strings.HasPrefix(name, "Deployment/") {
			continue
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: liveness probe %+v: want GET /healthz", name, c.LivenessProbe)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness probe %+v: want GET /readyz", name, c.ReadinessProbe)
		}
		grace := pod.Spec.TerminationGracePeriodSeconds
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || grace == nil ||
			c.Lifecycle.PreStop.Sleep.Seconds <= 0 || c.Lifecycle.PreStop.Sleep.Seconds >= *grace {
			t.Errorf("%s: want a preStop sleep shorter than terminationGracePeriodSeconds (%v)", name, grace)
		}
		if len(pod.Annotations["checksum/config"]) != 64 {
			t.Errorf("%s: checksum/config annotation %q: want a sha256", name, pod.Annotations["checksum/config"])
		}
	}
}

// checkPinned checks that the queue consumers never run twice: one replica,
// Recreate, no HPA, in every values set.
func checkPinned(t *testing.T, r rendered) {
	t.Helper()
	for comp, ref := range reference {
		if ref.scalable {
			continue
		}
		d := r.deployment(t, comp)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("%s: replicas %v, want exactly 1", comp, d.Spec.Replicas)
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("%s: strategy %q, want Recreate", comp, d.Spec.Strategy.Type)
		}
	}
	for _, m := range r.objects {
		if h, ok := m.obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
			target := strings.TrimPrefix(h.Spec.ScaleTargetRef.Name, release+"-threatview-")
			if ref, known := reference[target]; !known || !ref.scalable {
				t.Errorf("HPA %s scales %s, which must not autoscale", m.name, h.Spec.ScaleTargetRef.Name)
			}
			if d := r.deployment(t, target); d.Spec.Replicas != nil {
				t.Errorf("%s: replicas %d set while an HPA scales it", target, *d.Spec.Replicas)
			}
		}
	}
}

// checkSelectors checks that Services, PDBs and the Ingress point at pods
// that exist, and that every ConfigMap a pod reads is rendered.
func checkSelectors(t *testing.T, r rendered) {
	t.Helper()
	podLabels := map[string]map[string]string{}
	for _, m := range r.objects {
		if d, ok := m.obj.(*appsv1.Deployment); ok {
			podLabels[m.name] = d.Spec.Template.Labels
			if !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("Deployment %s: selector %v does not match its pods %v", m.name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
		}
	}
	matches := func(sel map[string]string) int {
		n := 0
		for _, l := range podLabels {
			if subset(sel, l) {
				n++
			}
		}
		return n
	}
	for _, m := range r.objects {
		switch o := m.obj.(type) {
		case *corev1.Service:
			if matches(o.Spec.Selector) != 1 {
				t.Errorf("Service %s: selector %v matches %d Deployments, want 1", m.name, o.Spec.Selector, matches(o.Spec.Selector))
			}
		case *policyv1.PodDisruptionBudget:
			if matches(o.Spec.Selector.MatchLabels) != 1 {
				t.Errorf("PDB %s: selector matches %d Deployments, want 1", m.name, matches(o.Spec.Selector.MatchLabels))
			}
		case *networkingv1.Ingress:
			for _, rule := range o.Spec.Rules {
				for _, p := range rule.HTTP.Paths {
					if _, ok := r.find("Service", p.Backend.Service.Name); !ok {
						t.Errorf("Ingress %s: backend Service %s is not rendered", m.name, p.Backend.Service.Name)
					}
				}
			}
		}
	}
	for name, pod := range podSpecs(r) {
		for _, ef := range pod.Spec.Containers[0].EnvFrom {
			if ef.ConfigMapRef == nil {
				t.Errorf("%s: envFrom %+v: only ConfigMaps expected", name, ef)
				continue
			}
			if _, ok := r.configMap(ef.ConfigMapRef.Name); !ok {
				t.Errorf("%s: envFrom ConfigMap %s is not rendered", name, ef.ConfigMapRef.Name)
			}
		}
	}
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestChart_ReferenceSizing(t *testing.T) {
	r := render(t, nil)
	for comp, ref := range reference {
		t.Run(comp, func(t *testing.T) {
			d := r.deployment(t, comp)
			req := d.Spec.Template.Spec.Containers[0].Resources.Requests
			if got := req[corev1.ResourceCPU]; got.Cmp(resource.MustParse(ref.cpu)) != 0 {
				t.Errorf("cpu request %s, want %s", got.String(), ref.cpu)
			}
			if got := req[corev1.ResourceMemory]; got.Cmp(resource.MustParse(ref.memory)) != 0 {
				t.Errorf("memory request %s, want %s", got.String(), ref.memory)
			}
			if got := effectiveReplicas(t, r, comp); got != ref.replicas {
				t.Errorf("replicas %d, want %d", got, ref.replicas)
			}
			if h := r.hpa(comp); ref.scalable != (h != nil) {
				t.Errorf("HPA present = %v, want %v (autoscaling is on by default for scalable services)", h != nil, ref.scalable)
			}
		})
	}
}

// effectiveReplicas is the Deployment's replicas, or its HPA's minReplicas.
func effectiveReplicas(t *testing.T, r rendered, comp string) int32 {
	t.Helper()
	d := r.deployment(t, comp)
	if h := r.hpa(comp); h != nil {
		if h.Spec.MinReplicas == nil {
			t.Fatalf("%s: HPA without minReplicas", comp)
		}
		if h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("%s: HPA maxReplicas %d < minReplicas %d", comp, h.Spec.MaxReplicas, *h.Spec.MinReplicas)
		}
		return *h.Spec.MinReplicas
	}
	if d.Spec.Replicas == nil {
		t.Fatalf("%s: no replicas and no HPA", comp)
	}
	return *d.Spec.Replicas
}

func TestChart_CostOverride(t *testing.T) {
	tests := []struct {
		name    string
		files   []string
		wantHPA bool
	}{
		{"OK/autoscaling", []string{"ci/cost-override.yaml"}, true},
		{"OK/fixed", []string{"ci/cost-override.yaml", "ci/autoscaling-off.yaml"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := make([]string, len(tt.files))
			for i, f := range tt.files {
				files[i] = filepath.Join(chartDir, f)
			}
			r := render(t, readValues(t, files...))
			for comp, ref := range reference {
				if got := effectiveReplicas(t, r, comp); got != 1 {
					t.Errorf("%s: replicas %d, want 1", comp, got)
				}
				if ref.scalable && (r.hpa(comp) != nil) != tt.wantHPA {
					t.Errorf("%s: HPA present = %v, want %v", comp, r.hpa(comp) != nil, tt.wantHPA)
				}
			}
		})
	}
}

func TestChart_AutoscalingOverride(t *testing.T) {
	r := render(t, map[string]any{
		"autoscaling":   map[string]any{"enabled": true},
		"tokens":        map[string]any{"autoscaling": map[string]any{"enabled": false}},
		"auditLogger":   map[string]any{"autoscaling": map[string]any{"minReplicas": 3, "maxReplicas": 2}},
		"dataProcessor": map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "2"}}},
	})
	if h := r.hpa("tokens"); h != nil {
		t.Errorf("tokens: HPA rendered although tokens.autoscaling.enabled is false")
	}
	if got := effectiveReplicas(t, r, "tokens"); got != 2 {
		t.Errorf("tokens: replicas %d, want defaultReplicas 2", got)
	}
	h := r.hpa("audit-logger")
	if h == nil || *h.Spec.MinReplicas != 3 || h.Spec.MaxReplicas != 3 {
		t.Errorf("audit-logger HPA %+v: want minReplicas 3, maxReplicas raised to 3", h)
	}

	off := render(t, map[string]any{
		"autoscaling":   map[string]any{"enabled": false},
		"dataCollector": map[string]any{"autoscaling": map[string]any{"enabled": true}},
	})
	if off.hpa("data-collector") == nil || off.hpa("tokens") != nil || off.hpa("audit-logger") != nil {
		t.Errorf("a service's autoscaling.enabled must override the global value")
	}
}

// TestChart_ConfigChecksum proves the checksum annotation follows the
// configuration, so a changed ConfigMap rolls the pods.
func TestChart_ConfigChecksum(t *testing.T) {
	a := render(t, nil)
	b := render(t, map[string]any{"logLevel": "debug"})
	for comp := range reference {
		da, db := a.deployment(t, comp), b.deployment(t, comp)
		ca, cb := da.Spec.Template.Annotations["checksum/config"], db.Spec.Template.Annotations["checksum/config"]
		if ca == cb {
			t.Errorf("%s: checksum/config unchanged after logLevel changed", comp)
		}
		cm, ok := a.configMap(release + "-threatview-" + comp)
		if !ok {
			t.Fatalf("%s: no ConfigMap", comp)
		}
		if cm.Data["LOG_LEVEL"] != "info" {
			t.Errorf("%s: LOG_LEVEL %q, want info", comp, cm.Data["LOG_LEVEL"])
		}
	}
}

// containerEnv resolves what a container's process sees: envFrom ConfigMaps
// first, then env in order. Values from Secrets or fields are "<ref>".
func containerEnv(t *testing.T, r rendered, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		cm, ok := r.configMap(ef.ConfigMapRef.Name)
		if !ok {
			t.Fatalf("container %s: ConfigMap %s not rendered", c.Name, ef.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			env[e.Name] = "<ref>"
		} else {
			env[e.Name] = e.Value
		}
	}
	return env
}

func TestChart_AuditingOff(t *testing.T) {
	r := render(t, readValues(t, filepath.Join(chartDir, "ci", "auditing-off.yaml")))
	d := r.deployment(t, "data-collector")
	env := containerEnv(t, r, d.Spec.Template.Spec.Containers[0])
	got, ok := env["AUDITLOGGER_SERVICE_URL"]
	if !ok || got != "" {
		t.Errorf("collector AUDITLOGGER_SERVICE_URL = %q (set: %v), want set and empty", got, ok)
	}

	on := render(t, nil)
	env = containerEnv(t, on, on.deployment(t, "data-collector").Spec.Template.Spec.Containers[0])
	want := "http://" + release + "-threatview-audit-logger:8081"
	if env["AUDITLOGGER_SERVICE_URL"] != want {
		t.Errorf("collector AUDITLOGGER_SERVICE_URL = %q, want %q", env["AUDITLOGGER_SERVICE_URL"], want)
	}
	if want := "http://" + release + "-threatview-tokens:8083"; env["TOKENS_SERVICE_URL"] != want {
		t.Errorf("collector TOKENS_SERVICE_URL = %q, want %q", env["TOKENS_SERVICE_URL"], want)
	}
	for _, svc := range []string{"audit-logger", "tokens"} {
		if _, ok := on.find("Service", release+"-threatview-"+svc); !ok {
			t.Errorf("the default URL names Service %s, which is not rendered", svc)
		}
	}
}

var dependentVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// TestChart_DependentEnv proves the password expansion works: every $(NAME)
// refers to a variable defined earlier in the same container (the kubelet
// leaves anything else verbatim), and the URLs come out in the right shape.
func TestChart_DependentEnv(t *testing.T) {
	for name, files := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, readValues(t, files...))
			for pod, spec := range podSpecs(r) {
				c := spec.Spec.Containers[0]
				defined := map[string]bool{}
				for _, ef := range c.EnvFrom {
					if cm, ok := r.configMap(ef.ConfigMapRef.Name); ok {
						for k := range cm.Data {
							defined[k] = true
						}
					}
				}
				for _, e := range c.Env {
					for _, m := range dependentVar.FindAllStringSubmatch(e.Value, -1) {
						if !defined[m[1]] {
							t.Errorf("%s: %s refers to $(%s), not defined before it", pod, e.Name, m[1])
						}
					}
					defined[e.Name] = true
				}
			}
		})
	}
	r := render(t, nil)
	env := containerEnv(t, r, r.deployment(t, "data-processor").Spec.Template.Spec.Containers[0])
	if want := "postgres://processor:$(EVENTS_DATABASE_PASSWORD)@postgres:5432/threatview?sslmode=disable"; env["EVENTS_DATABASE_URL"] != want {
		t.Errorf("EVENTS_DATABASE_URL = %q, want %q", env["EVENTS_DATABASE_URL"], want)
	}
	env = containerEnv(t, r, r.deployment(t, "tokens").Spec.Template.Spec.Containers[0])
	if want := "tokens:$(TOKENS_DATABASE_PASSWORD)@tcp(mariadb:3306)/tokens?parseTime=true"; env["TOKENS_DATABASE_DSN"] != want {
		t.Errorf("TOKENS_DATABASE_DSN = %q, want %q", env["TOKENS_DATABASE_DSN"], want)
	}

	whole := render(t, map[string]any{
		"postgres": map[string]any{"urlKey": "url"},
		"mariadb":  map[string]any{"tokens": map[string]any{"dsnKey": "tokens-dsn"}},
	})
	for _, e := range whole.deployment(t, "tokens").Spec.Template.Spec.Containers[0].Env {
		if e.Name == "TOKENS_DATABASE_PASSWORD" {
			t.Errorf("tokens: TOKENS_DATABASE_PASSWORD set although the DSN comes whole from the Secret")
		}
		if e.Name == "TOKENS_DATABASE_DSN" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != "tokens-dsn") {
			t.Errorf("tokens: TOKENS_DATABASE_DSN = %+v, want secretKeyRef tokens-dsn", e)
		}
	}
}

func TestChart_Jobs(t *testing.T) {
	def := render(t, nil)
	for _, m := range def.objects {
		if m.kind == "CronJob" && m.name != release+"-threatview-audit-verify" {
			t.Errorf("CronJob %s rendered by default; the retention jobs are off by default", m.name)
		}
	}
	// The audit trail's offline verification is on by default.
	if m, ok := def.find("CronJob", release+"-threatview-audit-verify"); !ok {
		t.Error("no audit-verify CronJob by default")
	} else if cj := m.obj.(*batchv1.CronJob); cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || !strings.Contains(m.raw, "schedule: \"") {
		t.Errorf("audit-verify: concurrencyPolicy %q, schedule quoted %v", cj.Spec.ConcurrencyPolicy, strings.Contains(m.raw, "schedule: \""))
	}
	m, ok := def.find("Job", release+"-threatview-migrations")
	if !ok {
		t.Fatal("no migration Job")
	}
	job := m.obj.(*batchv1.Job)
	if got := job.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
		t.Errorf("migration Job hook %q, want pre-install,pre-upgrade", got)
	}
	if job.Annotations["helm.sh/hook-weight"] == "" || !strings.Contains(job.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation") {
		t.Errorf("migration Job annotations %v: want a hook weight and delete policy", job.Annotations)
	}
	if job.Spec.Template.Spec.ServiceAccountName != "" {
		t.Errorf("migration Job uses ServiceAccount %q, which the chart creates only after pre-install hooks", job.Spec.Template.Spec.ServiceAccountName)
	}
	if args := job.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, []string{"-db", "all", "-ahead", "3"}) {
		t.Errorf("migrate args %q, want -db all -ahead 3", args)
	}
	for _, e := range job.Spec.Template.Spec.Containers[0].EnvFrom {
		t.Errorf("migration Job reads envFrom %+v: hooks run before the chart's ConfigMaps exist", e)
	}

	on := render(t, readValues(t, filepath.Join(chartDir, "ci", "cronjobs-on.yaml")))
	sched := map[string]string{}
	for _, comp := range []string{"archiver", "cleanup"} {
		m, ok := on.find("CronJob", release+"-threatview-"+comp)
		if !ok {
			t.Fatalf("CronJob %s not rendered with ci/cronjobs-on.yaml", comp)
		}
		cj := m.obj.(*batchv1.CronJob)
		sched[comp] = cj.Spec.Schedule
		if !strings.Contains(m.raw, fmt.Sprintf("schedule: %q", cj.Spec.Schedule)) {
			t.Errorf("%s: schedule is not quoted:\n%s", comp, m.raw)
		}
		if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("%s: concurrencyPolicy %q, want Forbid", comp, cj.Spec.ConcurrencyPolicy)
		}
		if cj.Spec.StartingDeadlineSeconds == nil || cj.Spec.SuccessfulJobsHistoryLimit == nil || cj.Spec.FailedJobsHistoryLimit == nil {
			t.Errorf("%s: want startingDeadlineSeconds and both history limits", comp)
		}
		if cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: restartPolicy %q, want Never", comp, cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy)
		}
	}
	if !cronBefore(t, sched["archiver"], sched["cleanup"]) {
		t.Errorf("archiver %q must run before cleanup %q", sched["archiver"], sched["cleanup"])
	}
}

// cronBefore compares two "minute hour day-of-month * *" schedules.
func cronBefore(t *testing.T, a, b string) bool {
	t.Helper()
	key := func(s string) [3]int {
		f := strings.Fields(s)
		if len(f) != 5 || f[3] != "*" || f[4] != "*" {
			t.Fatalf("schedule %q: want \"minute hour day-of-month * *\"", s)
		}
		var k [3]int
		for i, j := range []int{2, 1, 0} {
			if _, err := fmt.Sscanf(f[j], "%d", &k[i]); err != nil {
				t.Fatalf("schedule %q: %v", s, err)
			}
		}
		return k
	}
	ka, kb := key(a), key(b)
	return slices.Compare(ka[:], kb[:]) < 0
}

func TestChart_SchemaRejects(t *testing.T) {
	tests := []struct {
		name string
		vals map[string]any
	}{
		{"defaultReplicas string", map[string]any{"defaultReplicas": "two"}},
		{"defaultReplicas zero", map[string]any{"defaultReplicas": 0}},
		{"unknown top-level key", map[string]any{"defaultReplica": 1}},
		{"autoscaling.enabled string", map[string]any{"autoscaling": map[string]any{"enabled": "yes"}}},
		{"broker port out of range", map[string]any{"broker": map[string]any{"port": 70000}}},
		{"blank secret name", map[string]any{"secrets": map[string]any{"existingSecret": ""}}},
		{"bad memory quantity", map[string]any{"dataCollector": map[string]any{"resources": map[string]any{"requests": map[string]any{"memory": "760 MB"}}}}},
		{"bad log level", map[string]any{"logLevel": "verbose"}},
		{"registry in repository", map[string]any{"tokens": map[string]any{"image": map[string]any{"repository": "registry.example.com/threatview/tokens"}}}},
		{"schedule not a string", map[string]any{"cleanup": map[string]any{"schedule": 5}}},
		{"unknown autoscaling override", map[string]any{"tokens": map[string]any{"autoscaling": map[string]any{"minReplica": 1}}}},
		{"replicas on a pinned service", map[string]any{"dataProcessor": map[string]any{"replicas": 2}}},
		{"admin trusted proxy not a CIDR", map[string]any{"adminInterface": map[string]any{"trustedProxies": []any{"ingress.example.com"}}}},
		{"renderer trusted proxy not a CIDR", map[string]any{"visualRenderer": map[string]any{"trustedProxies": []any{"ingress.example.com"}}}},
		{"smtp TLS mode unknown", map[string]any{"alerts": map[string]any{"smtpTLS": "ssl"}}},
		{"egress allow-list as one string", map[string]any{"alerts": map[string]any{"egressAllow": "10.0.0.0/8,10.1.0.0/16"}}},
		{"egress allow entry with a comma", map[string]any{"alerts": map[string]any{"egressAllow": []any{"10.0.0.0/8,10.1.0.0/16"}}}},
		{"location grid too coarse", map[string]any{"dataCollector": map[string]any{"locationGrid": 20}}},
		{"renderer audit URL not http", map[string]any{"visualRenderer": map[string]any{"auditLoggerServiceUrl": "audit-logger:8081"}}},
	}
	c := loadChart(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderValues(c, tt.vals)
			if err == nil {
				t.Fatalf("render with %v: no error, want a schema violation", tt.vals)
			}
			if !strings.Contains(err.Error(), "schema") {
				t.Errorf("render with %v: %v, want a schema violation", tt.vals, err)
			}
		})
	}
	if _, err := renderValues(c, map[string]any{"defaultReplicas": 1, "dataCollector": map[string]any{"auditLoggerServiceUrl": ""}}); err != nil {
		t.Errorf("valid overrides rejected: %v", err)
	}
}

// TestChart_READMEListsEveryValue checks that README.md documents every leaf
// of values.yaml by its dotted path.
func TestChart_READMEListsEveryValue(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	vals := readValues(t, filepath.Join(chartDir, "values.yaml"))
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k, sub := range m {
				walk(strings.TrimPrefix(prefix+"."+k, "."), sub)
			}
			return
		}
		leaves = append(leaves, prefix)
	}
	walk("", vals)
	if len(leaves) < 50 {
		t.Fatalf("only %d leaves found in values.yaml", len(leaves))
	}
	for _, l := range leaves {
		if !bytes.Contains(readme, []byte("`"+l+"`")) {
			t.Errorf("README.md does not list `%s`", l)
		}
	}
}
