package charts

import (
	"path/filepath"
	"testing"
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
