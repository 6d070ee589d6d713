package charts

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestChart_AuditTrailS3: with auditTrail.s3 on, the worker, the audit
// logger and the audit-verify job read the trail's bucket (the archive's,
// from its s3:// target) with the archive's endpoint settings, and only the
// worker gets the Object Lock settings; off by default.
func TestChart_AuditTrailS3(t *testing.T) {
	on := render(t, readValues(t, filepath.Join(chartDir, "ci", "cronjobs-on.yaml")))
	def := render(t, nil)
	for _, comp := range []string{"audit-logger-worker", "audit-logger", "audit-verify"} {
		cm, ok := on.configMap(release + "-threatview-" + comp)
		if !ok {
			t.Fatalf("%s: no ConfigMap", comp)
		}
		if cm.Data["AUDIT_TRAIL_S3_BUCKET"] != "threatview-archive" || cm.Data["AUDIT_TRAIL_S3_PREFIX"] != "audit-trail" {
			t.Errorf("%s: bucket %q prefix %q, want the archive's bucket and audit-trail", comp,
				cm.Data["AUDIT_TRAIL_S3_BUCKET"], cm.Data["AUDIT_TRAIL_S3_PREFIX"])
		}
		wantLock := map[string]string{"audit-logger-worker": "COMPLIANCE"}[comp]
		if cm.Data["AUDIT_TRAIL_S3_LOCK_MODE"] != wantLock {
			t.Errorf("%s: AUDIT_TRAIL_S3_LOCK_MODE %q, want %q", comp, cm.Data["AUDIT_TRAIL_S3_LOCK_MODE"], wantLock)
		}
		if d, ok := def.configMap(release + "-threatview-" + comp); !ok || d.Data["AUDIT_TRAIL_S3_BUCKET"] != "" {
			t.Errorf("%s: AUDIT_TRAIL_S3_BUCKET set by default", comp)
		}
	}
}

// TestChart_AuditTrailNeedsExternalStore: with the audit trail on (the
// default) the chart refuses to render without a checkpoint store outside
// the database (before, checkpoints stayed in the database by default, where
// a database writer rewrites them); S3, or a directory with its volume,
// renders. The signing key's Secret reference is required (it was optional:
// the worker then signed nothing and the checkpoint metric never showed),
// and the PrometheusRule alerts on the metric's absence. With the trail off,
// no key is read and the absence is not alerted on.
func TestChart_AuditTrailNeedsExternalStore(t *testing.T) {
	c := loadChart(t)
	refused := []struct {
		name  string
		trail map[string]any
	}{
		{"Defaults", map[string]any{}},
		{"DirWithoutVolume", map[string]any{"dir": "/trail"}},
		{"S3Off", map[string]any{"s3": map[string]any{"enabled": false}, "volume": map[string]any{"emptyDir": map[string]any{}}}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			// renderWithAPIs: not renderValues, which adds the tests' store.
			_, err := renderWithAPIs(c, map[string]any{"auditTrail": tt.trail}, monitoringAPIs...)
			if err == nil || !strings.Contains(err.Error(), "checkpoint store outside the database") {
				t.Fatalf("render with auditTrail %v = %v, want refused for want of a checkpoint store", tt.trail, err)
			}
		})
	}
	signingKey := func(r rendered) *corev1.EnvVar {
		for _, e := range r.deployment(t, "audit-logger-worker").Spec.Template.Spec.Containers[0].Env {
			if e.Name == "AUDIT_SIGNING_KEYS" {
				return &e
			}
		}
		return nil
	}
	rule := func(r rendered) string {
		m, ok := r.find("PrometheusRule", release+"-threatview")
		if !ok {
			t.Fatal("no PrometheusRule")
		}
		return m.raw
	}
	on := map[string]any{"prometheusRule": map[string]any{"enabled": true}}
	for name, vals := range map[string]map[string]any{
		"S3":  mergeMaps(readValues(t, filepath.Join(chartDir, "values-eks.yaml")), on),
		"Dir": mergeMaps(readValues(t, trailStore), on),
	} {
		t.Run(name, func(t *testing.T) {
			r := render(t, vals)
			k := signingKey(r)
			if k == nil || k.ValueFrom == nil || k.ValueFrom.SecretKeyRef == nil {
				t.Fatalf("AUDIT_SIGNING_KEYS = %+v, want from the Secret", k)
			}
			if o := k.ValueFrom.SecretKeyRef.Optional; o != nil && *o {
				t.Errorf("AUDIT_SIGNING_KEYS is optional, want required")
			}
			if !strings.Contains(rule(r), "absent(auditworker_checkpoint_timestamp_seconds{") {
				t.Errorf("PrometheusRule has no alert on the absent checkpoint metric")
			}
		})
	}
	t.Run("Off", func(t *testing.T) {
		r := render(t, map[string]any{"auditTrail": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": true}})
		if k := signingKey(r); k != nil {
			t.Errorf("AUDIT_SIGNING_KEYS = %+v with the trail off, want unset", k)
		}
		if strings.Contains(rule(r), "absent(auditworker_checkpoint_timestamp_seconds") {
			t.Errorf("the absent checkpoint metric is alerted on with the trail off")
		}
	})
}
