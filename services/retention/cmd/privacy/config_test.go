package main

import (
	"strings"
	"testing"

	"threatview/platform/config"
)

func TestConfig_Parse(t *testing.T) {
	base := map[string]string{"EVENTS_DATABASE_URL": "postgres://u:p@127.0.0.1/db", "ADMIN_KEY": "a"}
	tests := []struct {
		name string
		env  map[string]string
		err  string // a part of the error, "" for none
	}{
		{"OK defaults", nil, ""},
		{"OK audited", map[string]string{"AUDITLOGGER_SERVICE_URL": "http://127.0.0.1:8081", "INTERNAL_KEY": "i"}, ""},
		{"NoDatabase", map[string]string{"EVENTS_DATABASE_URL": ""}, "EVENTS_DATABASE_URL"},
		{"NoAdminKey", map[string]string{"ADMIN_KEY": ""}, "ADMIN_KEY"},
		{"AuditWithoutKey", map[string]string{"AUDITLOGGER_SERVICE_URL": "http://127.0.0.1:8081"}, "INTERNAL_KEY"},
		{"BadAuditURL", map[string]string{"AUDITLOGGER_SERVICE_URL": "ftp://x", "INTERNAL_KEY": "i"}, "AUDITLOGGER_SERVICE_URL"},
		{"BatchZero", map[string]string{"PRIVACY_BATCH_ROWS": "0"}, "PRIVACY_BATCH_ROWS"},
		{"SettleNegative", map[string]string{"PRIVACY_SETTLE": "-1s"}, "PRIVACY_SETTLE"},
		{"AttemptsZero", map[string]string{"PRIVACY_MAX_ATTEMPTS": "0"}, "PRIVACY_MAX_ATTEMPTS"},
		{"BackoffBelowPoll", map[string]string{"PRIVACY_MAX_BACKOFF": "1s"}, "PRIVACY_MAX_BACKOFF"},
		{"OK archive dir", map[string]string{"ARCHIVE_TARGET": "dir:///var/archive"}, ""},
		{"ArchiveDirWithoutPath", map[string]string{"ARCHIVE_TARGET": "dir"}, "ARCHIVE_DIR"},
		{"ArchiveS3WithoutBucket", map[string]string{"ARCHIVE_TARGET": "s3"}, "ARCHIVE_S3_BUCKET"},
		{"ArchiveChunkZero", map[string]string{"ARCHIVE_CHUNK_ROWS": "0"}, "ARCHIVE_CHUNK_ROWS"},
		{"OK user id keys", map[string]string{"PRIVACY_USER_ID_KEYS": "k2:" + strings.Repeat("ab", 32) + ",k1:" + strings.Repeat("cd", 16)}, ""},
		{"UserIDKeyShort", map[string]string{"PRIVACY_USER_ID_KEYS": "k1:abcd"}, "PRIVACY_USER_ID_KEYS"},
		{"UserIDKeyNotHex", map[string]string{"PRIVACY_USER_ID_KEYS": "k1:" + strings.Repeat("zz", 16)}, "PRIVACY_USER_ID_KEYS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			var cfg Config
			err := config.Parse(func(k string) string { return env[k] }, &cfg)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Parse = %v, want nil", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("Parse = %v, want an error naming %s", err, tt.err)
			}
			if tt.err == "" && (cfg.BatchRows != 5000 || cfg.Settle.Seconds() != 5) {
				t.Errorf("defaults = %d rows, settle %s", cfg.BatchRows, cfg.Settle)
			}
		})
	}
}
