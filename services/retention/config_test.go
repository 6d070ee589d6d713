package retention_test

import (
	"strings"
	"testing"

	"threatview/platform/config"
	"threatview/retention"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestCleanupConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		require bool
		errHas  string
	}{
		{"defaults: archiving off, not required", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y"}, false, ""},
		{"archiving on: required by default", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y", "ARCHIVE_TARGET": "dir:///var/archive"}, true, ""},
		{"archiving on, explicitly not required", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y", "ARCHIVE_TARGET": "s3://b/p", "CLEANUP_REQUIRE_ARCHIVE": "false"}, false, ""},
		{"required without a target", map[string]string{"AUDIT_DATABASE_DSN": "u:p@tcp(h:1)/a", "CLEANUP_REQUIRE_ARCHIVE": "true"}, true, ""},
		{"bad require value", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y", "CLEANUP_REQUIRE_ARCHIVE": "maybe"}, false, "CLEANUP_REQUIRE_ARCHIVE"},
		{"zero retention", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y", "CLEANUP_EVENTS_RETENTION_MONTHS": "0"}, false, "CLEANUP_EVENTS_RETENTION_MONTHS"},
		{"no database", map[string]string{}, false, "EVENTS_DATABASE_URL"},
		{"bad target", map[string]string{"EVENTS_DATABASE_URL": "postgres://x/y", "ARCHIVE_TARGET": "ftp://x"}, false, "ARCHIVE_TARGET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg retention.CleanupConfig
			err := config.Parse(env(tt.env), &cfg)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("Parse(%v) = %v, want an error naming %s", tt.env, err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%v) = %v", tt.env, err)
			}
			if got := cfg.ArchiveRequired(); got != tt.require {
				t.Errorf("ArchiveRequired() = %v, want %v", got, tt.require)
			}
			if cfg.Enabled {
				t.Errorf("Enabled = true by default, want false")
			}
		})
	}
}

func TestArchiverConfig_Target(t *testing.T) {
	tests := []struct {
		name                string
		env                 map[string]string
		dir, bucket, prefix string
		errHas              string
	}{
		{"dir URL", map[string]string{"ARCHIVE_TARGET": "dir:///var/archive"}, "/var/archive", "", "", ""},
		{"dir kind", map[string]string{"ARCHIVE_TARGET": "dir", "ARCHIVE_DIR": "/data"}, "/data", "", "", ""},
		{"s3 URL", map[string]string{"ARCHIVE_TARGET": "s3://bucket/a/b/"}, "", "bucket", "a/b", ""},
		{"s3 kind", map[string]string{"ARCHIVE_TARGET": "s3", "ARCHIVE_S3_BUCKET": "bk", "ARCHIVE_S3_PREFIX": "p"}, "", "bk", "p", ""},
		{"s3 disagreement", map[string]string{"ARCHIVE_TARGET": "s3://one/p", "ARCHIVE_S3_BUCKET": "two"}, "", "", "", "ARCHIVE_S3_BUCKET"},
		{"dir kind without dir", map[string]string{"ARCHIVE_TARGET": "dir"}, "", "", "", "ARCHIVE_DIR"},
		{"no target", map[string]string{}, "", "", "", "ARCHIVE_TARGET"},
		{"bad chunk", map[string]string{"ARCHIVE_TARGET": "dir:///a", "ARCHIVE_CHUNK_ROWS": "0"}, "", "", "", "ARCHIVE_CHUNK_ROWS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["EVENTS_DATABASE_URL"] = "postgres://x/y"
			var cfg retention.ArchiverConfig
			err := config.Parse(env(tt.env), &cfg)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("Parse(%v) = %v, want an error naming %s", tt.env, err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%v) = %v", tt.env, err)
			}
			a := cfg.Archive
			if a.Dir != tt.dir || a.S3Bucket != tt.bucket || a.S3Prefix != tt.prefix {
				t.Errorf("Parse(%v) = dir %q bucket %q prefix %q, want %q %q %q", tt.env, a.Dir, a.S3Bucket, a.S3Prefix, tt.dir, tt.bucket, tt.prefix)
			}
		})
	}
}
