package charts

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/retention"
)

// serviceConfigs maps each container the chart runs to a fresh value of the
// configuration struct its command parses.
var serviceConfigs = map[string]func() any{
	"cleanup":  func() any { return &retention.CleanupConfig{} },
	"archiver": func() any { return &retention.ArchiverConfig{} },
}

// migrateEnv is what migrations/cmd/migrate reads (it has flags and three
// variables, no Config struct).
var migrateEnv = []string{"EVENTS_DATABASE_URL", "AUDIT_DATABASE_DSN", "TOKENS_DATABASE_DSN", "IDENTITY_DATABASE_DSN"}

// runtimeEnv is read by the Go runtime of every binary.
var runtimeEnv = []string{"GOMAXPROCS", "GOMEMLIMIT"}

// resolvedEnv is a container's environment as the process sees it:
// ConfigMap values, a distinct stand-in for each Secret value, and $(NAME)
// references expanded the way the kubelet does.
type resolvedEnv struct {
	values   map[string]string
	expanded map[string]bool // variables consumed by a $(NAME) reference
}

func resolveEnv(t *testing.T, r rendered, c corev1.Container) resolvedEnv {
	t.Helper()
	env := resolvedEnv{values: map[string]string{}, expanded: map[string]bool{}}
	for _, ef := range c.EnvFrom {
		cm, ok := r.configMap(ef.ConfigMapRef.Name)
		if !ok {
			t.Fatalf("container %s: ConfigMap %s not rendered", c.Name, ef.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env.values[k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env.values[e.Name] = dependentVar.ReplaceAllStringFunc(e.Value, func(ref string) string {
				name := ref[2 : len(ref)-1]
				v, ok := env.values[name]
				if !ok {
					return ref
				}
				env.expanded[name] = true
				return v
			})
		case e.ValueFrom.SecretKeyRef != nil:
			env.values[e.Name] = "secret-" + strings.ToLower(e.Name)
		default:
			env.values[e.Name] = "1"
		}
	}
	return env
}

// TestChart_EnvIsRead proves the chart sets no variable a service ignores and
// that each service's own parser (config.Parse, with its Validate) accepts
// the environment the chart gives it, in every values set.
func TestChart_EnvIsRead(t *testing.T) {
	for name, files := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, readValues(t, files...))
			seen := map[string]bool{}
			for pod, spec := range podSpecs(r) {
				c := spec.Spec.Containers[0]
				env := resolveEnv(t, r, c)
				var read []string
				newCfg, ok := serviceConfigs[c.Name]
				var required []string
				switch {
				case ok:
					keys, err := config.Keys(newCfg())
					if err != nil {
						t.Fatalf("%s: config.Keys: %v", c.Name, err)
					}
					read = keys
				case c.Name == "migrate":
					read, required = migrateEnv, migrateEnv
				case cmdConfigs[c.Name] != "":
					read, required = cmdConfigKeys(t, cmdConfigs[c.Name])
				default:
					t.Fatalf("%s: container %s: no known configuration", pod, c.Name)
				}
				seen[c.Name] = true
				var ignored []string
				for k := range env.values {
					if !slices.Contains(read, k) && !slices.Contains(runtimeEnv, k) && !env.expanded[k] {
						ignored = append(ignored, k)
					}
				}
				sort.Strings(ignored)
				if len(ignored) > 0 {
					t.Errorf("%s: sets %v, which %s does not read", pod, ignored, c.Name)
				}
				if !ok {
					for _, k := range required {
						if env.values[k] == "" {
							t.Errorf("%s: %s not set", pod, k)
						}
					}
					continue
				}
				cfg := newCfg()
				getenv := func(k string) string { return env.values[k] }
				if err := config.Parse(getenv, cfg); err != nil {
					t.Errorf("%s: the service rejects the chart's environment: %v", pod, err)
				}
			}
			for _, want := range []string{"data-collector", "data-processor", "audit-logger", "audit-logger-worker", "tokens",
				"identity", "visual-renderer", "admin-interface", "migrate"} {
				if !seen[want] {
					t.Errorf("no container %s rendered", want)
				}
			}
		})
	}
}

// TestChart_EnvReachesConfig checks a few settings end to end: values in,
// parsed service configuration out.
func TestChart_EnvReachesConfig(t *testing.T) {
	envOf := func(t *testing.T, r rendered, kind, name string) map[string]string {
		t.Helper()
		pods := podSpecs(r)
		spec, ok := pods[kind+"/"+release+"-threatview-"+name]
		if !ok {
			t.Fatalf("no %s %s", kind, name)
		}
		return resolveEnv(t, r, spec.Spec.Containers[0]).values
	}
	parse := func(t *testing.T, r rendered, kind, name string, cfg any) {
		t.Helper()
		env := envOf(t, r, kind, name)
		if err := config.Parse(func(k string) string { return env[k] }, cfg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	t.Run("AuditingOff", func(t *testing.T) {
		r := render(t, readValues(t, "threatview/ci/auditing-off.yaml"))
		// The collector's Config lives in its command: its variables, as set.
		col := envOf(t, r, "Deployment", "data-collector")
		if col["AUDITLOGGER_SERVICE_URL"] != "" {
			t.Errorf("collector AUDITLOGGER_SERVICE_URL = %q, want blank (auditing off)", col["AUDITLOGGER_SERVICE_URL"])
		}
	})

	t.Run("EKS", func(t *testing.T) {
		r := render(t, readValues(t, "threatview/values-eks.yaml"))
		col := envOf(t, r, "Deployment", "data-collector")
		if tls, err := strconv.ParseBool(col["STOMP_TLS"]); err != nil || !tls || !strings.HasSuffix(col["STOMP_ADDR"], ":61614") {
			t.Errorf("collector broker %s STOMP_TLS=%q, want Amazon MQ stomp+ssl on 61614", col["STOMP_ADDR"], col["STOMP_TLS"])
		}
		if col["GEOIP_DB_PATH"] != "/var/lib/geoip/country.mmdb" {
			t.Errorf("collector GEOIP_DB_PATH = %q, want the mounted database", col["GEOIP_DB_PATH"])
		}
		if col["COLLECTOR_TRUSTED_PROXIES"] != "10.0.0.0/16" {
			t.Errorf("collector COLLECTOR_TRUSTED_PROXIES = %q", col["COLLECTOR_TRUSTED_PROXIES"])
		}
		procURL := envOf(t, r, "Deployment", "data-processor")["EVENTS_DATABASE_URL"]
		if !strings.Contains(procURL, "sslmode=require") || !strings.Contains(procURL, "secret-events_database_password@") {
			t.Errorf("processor EVENTS_DATABASE_URL = %q, want the password expanded and sslmode=require", procURL)
		}
		var clean retention.CleanupConfig
		parse(t, r, "CronJob", "cleanup", &clean)
		if !clean.Enabled || clean.Archive.S3Bucket != "threatview-archive" || !clean.ArchiveRequired() {
			t.Errorf("cleanup config %+v: want enabled, archive required in bucket threatview-archive", clean)
		}
		var arch retention.ArchiverConfig
		parse(t, r, "CronJob", "archiver", &arch)
		if arch.Archive.S3Region != "eu-west-1" {
			t.Errorf("archiver region %q, want eu-west-1", arch.Archive.S3Region)
		}
	})

	// The admin interface and the visual renderer sign people in on behalf
	// of their browsers: each believes X-Forwarded-For only from the ingress
	// CIDRs of its trustedProxies, and splits the variable at commas and reads
	// it with httpserver.ParsePrefixes (its Config.Validate does the same).
	for _, c := range []struct{ name, block, deployment, env string }{
		{"AdminUITrustedProxies", "adminInterface", "admin-interface", "ADMINUI_TRUSTED_PROXIES"},
		{"RendererTrustedProxies", "visualRenderer", "visual-renderer", "RENDERER_TRUSTED_PROXIES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if v, ok := envOf(t, render(t, readValues(t)), "Deployment", c.deployment)[c.env]; ok {
				t.Errorf("%s %s = %q by default, want unset (no proxy believed)", c.deployment, c.env, v)
			}
			r := render(t, map[string]any{c.block: map[string]any{"trustedProxies": []any{"10.0.0.0/16", "fd00:ec2::/64"}}})
			got := envOf(t, r, "Deployment", c.deployment)[c.env]
			prefixes, err := httpserver.ParsePrefixes(strings.Split(got, ","))
			if err != nil || len(prefixes) != 2 || prefixes[0].String() != "10.0.0.0/16" || prefixes[1].String() != "fd00:ec2::/64" {
				t.Errorf("%s %s = %q (%v, %v), want both CIDRs of %s.trustedProxies", c.deployment, c.env, got, prefixes, err, c.block)
			}
		})
	}

	// RendererForwarderKey: the renderer names browsers' addresses to
	// identity only with identity's forwarder key; with the chart's
	// defaults (no IDENTITY_FORWARDER_KEY) both derive it from INTERNAL_KEY.
	t.Run("RendererForwarderKey", func(t *testing.T) {
		r := render(t, readValues(t))
		id, vr := envOf(t, r, "Deployment", "identity"), envOf(t, r, "Deployment", "visual-renderer")
		want := cmp.Or(id["IDENTITY_FORWARDER_KEY"], httpserver.ForwarderKey(id["INTERNAL_KEY"]))
		// As the renderer's identity.ForwarderKey derives it.
		got := cmp.Or(vr["RENDERER_IDENTITY_FORWARDER_KEY"], httpserver.ForwarderKey(vr["INTERNAL_KEY"]))
		if want == "" || got != want {
			t.Errorf("visual renderer's forwarder key (set: %t) differs from identity's (set: %t): want the same, non-empty (else identity throttles per renderer replica)", got != "", want != "")
		}
	})

	t.Run("AlertsOff", func(t *testing.T) {
		on := envOf(t, render(t, readValues(t)), "Deployment", "data-processor")
		if v, ok := on["PROCESSOR_ALERTS_OUTBOX"]; ok {
			t.Errorf("processor PROCESSOR_ALERTS_OUTBOX = %q with alerts on, want unset (default true)", v)
		}
		off := envOf(t, render(t, map[string]any{"alerts": map[string]any{"enabled": false}}), "Deployment", "data-processor")
		if v, err := strconv.ParseBool(off["PROCESSOR_ALERTS_OUTBOX"]); err != nil || v {
			t.Errorf("processor PROCESSOR_ALERTS_OUTBOX = %q with alerts off, want false (nothing would prune the outbox)", off["PROCESSOR_ALERTS_OUTBOX"])
		}
	})

	// PrivacyArchive: an erasure rewrites the archived months holding the
	// subject, so the privacy service must see the archiver's store (kind,
	// bucket, endpoint, prefix, region, path style), with the same
	// credentials source as a ServiceAccount of its own (an IAM role of its
	// own is bound to it), and a directory archive mounted where the archiver
	// writes it.
	t.Run("PrivacyArchive", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			values map[string]any
			kind   string
		}{
			{"S3", map[string]any{"archiver": map[string]any{"enabled": true, "chunkRows": 5000}, "archive": map[string]any{"target": "s3",
				"s3": map[string]any{"endpoint": "https://s3.example.test", "region": "eu-central-1", "bucket": "tv-archive",
					"prefix": "partitions", "forcePathStyle": true}}}, "s3"},
			{"Dir", map[string]any{"archiver": map[string]any{"enabled": true}, "archive": map[string]any{"target": "dir:///var/archive",
				"dir": "/var/archive", "volume": map[string]any{"persistentVolumeClaim": map[string]any{"claimName": "archive"}}}}, "dir"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := render(t, c.values)
				var arch, priv retention.TargetConfig
				parse(t, r, "CronJob", "archiver", &arch)
				parse(t, r, "Deployment", "privacy", &priv)
				if err := priv.Resolve(); err != nil || priv.Kind() != c.kind {
					t.Fatalf("privacy archive %+v (%v), want a %s target", priv, err, c.kind)
				}
				if err := arch.Resolve(); err != nil || priv != arch {
					t.Errorf("privacy archive %+v, archiver's %+v: want the same store", priv, arch)
				}
				env := envOf(t, r, "Deployment", "privacy")
				if want := envOf(t, r, "CronJob", "archiver")["ARCHIVE_CHUNK_ROWS"]; env["ARCHIVE_CHUNK_ROWS"] != want {
					t.Errorf("privacy ARCHIVE_CHUNK_ROWS = %q, archiver's %q", env["ARCHIVE_CHUNK_ROWS"], want)
				}
				pods := podSpecs(r)
				p, a := pods["Deployment/"+release+"-threatview-privacy"].Spec, pods["CronJob/"+release+"-threatview-archiver"].Spec
				if p.ServiceAccountName == "" || p.ServiceAccountName == a.ServiceAccountName {
					t.Errorf("privacy ServiceAccount %q, archiver's %q: want one of its own", p.ServiceAccountName, a.ServiceAccountName)
				}
				mounted := slices.ContainsFunc(p.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.MountPath == "/var/archive" && !m.ReadOnly
				})
				if mounted != (c.kind == "dir") {
					t.Errorf("privacy mounts /var/archive writable: %t, want %t", mounted, c.kind == "dir")
				}
			})
		}
		// The EKS values: the privacy service writes the archiver's bucket.
		var priv retention.TargetConfig
		parse(t, render(t, readValues(t, "threatview/values-eks.yaml")), "Deployment", "privacy", &priv)
		if err := priv.Resolve(); err != nil || priv.S3Bucket != "threatview-archive" || priv.S3Prefix != "partitions" || priv.S3Region != "eu-west-1" {
			t.Errorf("EKS privacy archive %+v (%v), want s3://threatview-archive/partitions in eu-west-1", priv, err)
		}
	})

	// AdminUIPrivacy: the admin interface's erasure pages reach the privacy
	// service's Service on its port, and are left out with the service.
	t.Run("AdminUIPrivacy", func(t *testing.T) {
		r := render(t, readValues(t))
		got := envOf(t, r, "Deployment", "admin-interface")["PRIVACY_SERVICE_URL"]
		m, ok := r.find("Service", release+"-threatview-privacy")
		if !ok {
			t.Fatal("no privacy Service rendered")
		}
		svc := m.obj.(*corev1.Service)
		if want := "http://" + svc.Name + ":" + strconv.Itoa(int(svc.Spec.Ports[0].Port)); got != want {
			t.Errorf("admin-interface PRIVACY_SERVICE_URL = %q, want %q (the privacy Service)", got, want)
		}
		off := envOf(t, render(t, map[string]any{"privacy": map[string]any{"enabled": false}}), "Deployment", "admin-interface")
		if v, ok := off["PRIVACY_SERVICE_URL"]; ok {
			t.Errorf("admin-interface PRIVACY_SERVICE_URL = %q with privacy off, want unset", v)
		}
	})

	// AlertsSettings: the alerts service's egress allow-list, s3 buckets,
	// forwarder backlog bound and SMTP TLS reach its environment; the CA file
	// is mounted where ALERTS_SMTP_CA_FILE names it.
	t.Run("AlertsSettings", func(t *testing.T) {
		def := envOf(t, render(t, readValues(t)), "Deployment", "alerts")
		if def["ALERTS_SMTP_TLS"] != "starttls" || def["ALERTS_FORWARD_MAX_BACKLOG"] != "1000000" {
			t.Errorf("alerts defaults: ALERTS_SMTP_TLS %q, ALERTS_FORWARD_MAX_BACKLOG %q, want starttls and 1000000",
				def["ALERTS_SMTP_TLS"], def["ALERTS_FORWARD_MAX_BACKLOG"])
		}
		for _, k := range []string{"ALERTS_EGRESS_ALLOW", "ALERTS_S3_BUCKETS", "ALERTS_SMTP_CA_FILE"} {
			if v, ok := def[k]; ok {
				t.Errorf("alerts %s = %q by default, want unset (nothing private allowed, no s3 forwarder, the system's CAs)", k, v)
			}
		}
		r := render(t, map[string]any{"alerts": map[string]any{
			"egressAllow": []any{"10.20.0.0/16", "siem.internal:6514"}, "s3Buckets": []any{"siem-a", "siem-b"},
			"forwardMaxBacklog": 2500000, "smtpTLS": "tls", "smtpCAFile": "/etc/smtp-ca/ca.pem",
			"smtpCAVolume": map[string]any{"secret": map[string]any{"secretName": "smtp-ca"}}}})
		env := envOf(t, r, "Deployment", "alerts")
		for k, want := range map[string]string{"ALERTS_EGRESS_ALLOW": "10.20.0.0/16,siem.internal:6514",
			"ALERTS_S3_BUCKETS": "siem-a,siem-b", "ALERTS_FORWARD_MAX_BACKLOG": "2500000", "ALERTS_SMTP_TLS": "tls",
			"ALERTS_SMTP_CA_FILE": "/etc/smtp-ca/ca.pem"} {
			if env[k] != want {
				t.Errorf("alerts %s = %q, want %q", k, env[k], want)
			}
		}
		spec := podSpecs(r)["Deployment/"+release+"-threatview-alerts"].Spec
		mounted := slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "smtp-ca" && m.MountPath == "/etc/smtp-ca" && m.ReadOnly
		})
		sourced := slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == "smtp-ca" && v.Secret != nil && v.Secret.SecretName == "smtp-ca"
		})
		if !mounted || !sourced {
			t.Errorf("alerts: smtp-ca mounted read-only at /etc/smtp-ca %t, from Secret smtp-ca %t", mounted, sourced)
		}
		for name, vals := range map[string]map[string]any{
			"backlog below batch": {"forwardMaxBacklog": 100, "forwardBatch": 500},
			"CA volume, no file":  {"smtpCAVolume": map[string]any{"secret": map[string]any{"secretName": "smtp-ca"}}},
		} {
			if _, err := renderValues(loadChart(t), map[string]any{"alerts": vals}); err == nil || !strings.Contains(err.Error(), "alerts.") {
				t.Errorf("%s: render error %v, want one naming the alerts value", name, err)
			}
		}
	})

	// UserIDKeys: the collector pseudonymises user ids with the Secret's key
	// ring and the renderer searches with the same one; a missing key drops
	// user ids rather than keeping them (optional), and the renderer audits
	// its searches at the audit logger's Service with INTERNAL_KEY.
	t.Run("UserIDKeys", func(t *testing.T) {
		keyRef := func(r rendered, comp, name string) *corev1.SecretKeySelector {
			for _, e := range r.deployment(t, comp).Spec.Template.Spec.Containers[0].Env {
				if e.Name == name && e.ValueFrom != nil {
					return e.ValueFrom.SecretKeyRef
				}
			}
			return nil
		}
		r := render(t, readValues(t))
		for _, c := range []struct{ comp, name string }{{"data-collector", "COLLECTOR_USER_ID_KEYS"}, {"visual-renderer", "RENDERER_USER_ID_KEYS"}} {
			ref := keyRef(r, c.comp, c.name)
			if ref == nil || ref.Name != "threatview-keys" || ref.Key != "user-id-keys" || ref.Optional == nil || !*ref.Optional {
				t.Errorf("%s %s from %+v, want optional key user-id-keys of threatview-keys", c.comp, c.name, ref)
			}
		}
		col := envOf(t, r, "Deployment", "data-collector")
		if g, err := strconv.ParseFloat(col["COLLECTOR_LOCATION_GRID"], 64); err != nil || g != 0.1 {
			t.Errorf("collector COLLECTOR_LOCATION_GRID = %q, want 0.1", col["COLLECTOR_LOCATION_GRID"])
		}
		vr := envOf(t, r, "Deployment", "visual-renderer")
		m, ok := r.find("Service", release+"-threatview-audit-logger")
		if !ok {
			t.Fatal("no audit-logger Service rendered")
		}
		svc := m.obj.(*corev1.Service)
		if want := "http://" + svc.Name + ":" + strconv.Itoa(int(svc.Spec.Ports[0].Port)); vr["AUDITLOGGER_SERVICE_URL"] != want || vr["INTERNAL_KEY"] == "" {
			t.Errorf("visual-renderer AUDITLOGGER_SERVICE_URL = %q (INTERNAL_KEY set %t), want %q with INTERNAL_KEY",
				vr["AUDITLOGGER_SERVICE_URL"], vr["INTERNAL_KEY"] != "", want)
		}

		r = render(t, map[string]any{"dataCollector": map[string]any{"userIdKeys": map[string]any{"existingSecret": "pseudonyms", "key": "ring"},
			"locationGrid": 0.5}})
		for _, comp := range []string{"data-collector", "visual-renderer"} {
			name := map[string]string{"data-collector": "COLLECTOR_USER_ID_KEYS", "visual-renderer": "RENDERER_USER_ID_KEYS"}[comp]
			if ref := keyRef(r, comp, name); ref == nil || ref.Name != "pseudonyms" || ref.Key != "ring" {
				t.Errorf("%s %s from %+v, want key ring of Secret pseudonyms", comp, name, ref)
			}
		}
		if g := envOf(t, r, "Deployment", "data-collector")["COLLECTOR_LOCATION_GRID"]; g != "0.5" {
			t.Errorf("collector COLLECTOR_LOCATION_GRID = %q, want 0.5", g)
		}
		r = render(t, map[string]any{"dataCollector": map[string]any{"userIdKeys": map[string]any{"key": ""}},
			"visualRenderer": map[string]any{"auditLoggerServiceUrl": ""}})
		if v, ok := envOf(t, r, "Deployment", "data-collector")["COLLECTOR_USER_ID_KEYS"]; ok {
			t.Errorf("collector COLLECTOR_USER_ID_KEYS = %q with no key, want unset", v)
		}
		vr = envOf(t, r, "Deployment", "visual-renderer")
		for _, k := range []string{"RENDERER_USER_ID_KEYS", "AUDITLOGGER_SERVICE_URL"} {
			if v, ok := vr[k]; ok {
				t.Errorf("visual-renderer %s = %q, want unset", k, v)
			}
		}
	})

	t.Run("ArchiverWithoutTarget", func(t *testing.T) {
		_, err := renderValues(loadChart(t), map[string]any{"archiver": map[string]any{"enabled": true}})
		if err == nil || !strings.Contains(err.Error(), "archive.target") {
			t.Errorf("render archiver without archive.target: %v, want an error naming archive.target", err)
		}
	})
}
