package charts

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestChart_LeastPrivilege: with the EKS values every workload runs as a
// ServiceAccount of its own, and only the components that touch S3 carry an
// IAM role, each its own (before, every workload ran as one ServiceAccount
// annotated with the archiver's role, so the alerts service could write the
// archive and the trail's checkpoints). The processor, alerts and privacy
// connect to PostgreSQL as users of their own, every audit-database client
// to MariaDB as its own user; the internet-facing renderer gets no
// ADMIN_KEY unless asked for; the README lists each one's grants.
func TestChart_LeastPrivilege(t *testing.T) {
	r := render(t, readValues(t, filepath.Join(chartDir, "values-eks.yaml")))
	accounts := map[string]*corev1.ServiceAccount{}
	for _, m := range r.objects {
		if sa, ok := m.obj.(*corev1.ServiceAccount); ok {
			accounts[m.name] = sa
		}
	}
	withRole := map[string]bool{"archiver": true, "cleanup": true, "privacy": true, "audit-logger-worker": true,
		"audit-logger": true, "audit-verify": true, "alerts": true}
	roles := map[string]string{}
	for name, pod := range podSpecs(r) {
		if strings.HasPrefix(name, "Job/") || strings.HasPrefix(name, "Pod/") {
			continue // the migration hook and helm test: the namespace's default
		}
		comp := pod.Labels["app.kubernetes.io/component"]
		sa := pod.Spec.ServiceAccountName
		if want := release + "-threatview-" + comp; sa != want {
			t.Errorf("%s runs as ServiceAccount %q, want its own %q", name, sa, want)
			continue
		}
		acc, ok := accounts[sa]
		if !ok {
			t.Errorf("%s: ServiceAccount %s not rendered", name, sa)
			continue
		}
		role := acc.Annotations["eks.amazonaws.com/role-arn"]
		switch {
		case withRole[comp] && role == "":
			t.Errorf("%s: no IAM role, want its own", comp)
		case !withRole[comp] && role != "":
			t.Errorf("%s: IAM role %s, want none (it touches no object store)", comp, role)
		case role != "":
			for other, r := range roles {
				if r == role && other != comp {
					t.Errorf("%s and %s share the IAM role %s", comp, other, role)
				}
			}
			roles[comp] = role
		}
	}
	if len(roles) != len(withRole) {
		t.Errorf("IAM roles on %v, want one on each of %v", roles, withRole)
	}

	def := render(t, nil)
	user := func(r rendered, comp, kind, name string) string {
		t.Helper()
		var c corev1.Container
		for n, p := range podSpecs(r) {
			if n == kind+"/"+release+"-threatview-"+comp {
				c = p.Spec.Containers[0]
			}
		}
		v := resolveEnv(t, r, c).values[name]
		if strings.HasPrefix(v, "postgres://") {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatalf("%s %s: %v", comp, name, err)
			}
			return u.User.Username()
		}
		u, _, _ := strings.Cut(v, ":")
		return u
	}
	seen := map[string]string{}
	for _, c := range []struct{ comp, kind, env, want string }{
		{"data-processor", "Deployment", "EVENTS_DATABASE_URL", "processor"},
		{"alerts", "Deployment", "ALERTS_DATABASE_URL", "alerts"},
		{"privacy", "Deployment", "EVENTS_DATABASE_URL", "privacy"},
		{"visual-renderer", "Deployment", "RENDERER_DATABASE_URL", "renderer"},
		{"audit-logger", "Deployment", "AUDIT_DATABASE_DSN", "auditlogger"},
		{"audit-logger-worker", "Deployment", "AUDIT_DATABASE_DSN", "auditworker"},
		{"privacy", "Deployment", "AUDIT_DATABASE_DSN", "privacy"},
		{"audit-verify", "CronJob", "AUDIT_DATABASE_DSN", "auditverify"},
	} {
		got := user(def, c.comp, c.kind, c.env)
		if got != c.want {
			t.Errorf("%s %s connects as %q, want its own user %q", c.comp, c.env, got, c.want)
		}
		db := c.env[:strings.Index(c.env, "_")]
		if db == "RENDERER" || db == "ALERTS" {
			db = "EVENTS"
		}
		if other, ok := seen[db+"/"+got]; ok {
			t.Errorf("%s and %s share the %s user %q", c.comp, other, db, got)
		}
		seen[db+"/"+got] = c.comp
	}

	hasAdminKey := func(r rendered) bool {
		for _, e := range r.deployment(t, "visual-renderer").Spec.Template.Spec.Containers[0].Env {
			if e.Name == "ADMIN_KEY" {
				return true
			}
		}
		return false
	}
	if hasAdminKey(def) {
		t.Error("the visual renderer gets ADMIN_KEY by default")
	}
	if !hasAdminKey(render(t, map[string]any{"visualRenderer": map[string]any{"adminKey": true}})) {
		t.Error("visualRenderer.adminKey: true gives no ADMIN_KEY")
	}
	if _, err := renderValues(loadChart(t), map[string]any{"identity": map[string]any{"enabled": false}}); err == nil ||
		!strings.Contains(err.Error(), "visualRenderer.adminKey") {
		t.Errorf("renderer without identity nor the admin key = %v, want refused", err)
	}

	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	mig, err := os.ReadFile(filepath.Join("..", "migrations", "events", "000091_service_roles.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Least privilege", "schema `alerts`", "data-processor (`postgres.processor`)",
		"alerts (`postgres.alerts`)", "privacy (`postgres.privacy`)", "visual-renderer (`postgres.renderer`",
		"audit-logger (`auditLogger`)", "audit-logger-worker (`auditLoggerWorker`)", "privacy (`privacy`)", "audit-verify (`auditVerify`)"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md's grants do not name %s", want)
		}
	}
	for _, role := range []string{"threatview_processor", "threatview_alerts", "threatview_privacy"} {
		if !strings.Contains(string(readme), "`"+role+"`") || !strings.Contains(string(mig), "TO "+role) {
			t.Errorf("role %s: not both in README.md and granted by migration 000091", role)
		}
	}
}
