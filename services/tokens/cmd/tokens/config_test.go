package main

import (
	"strings"
	"testing"

	"threatview/platform/config"
)

func TestConfig(t *testing.T) {
	base := map[string]string{
		"TOKENS_DATABASE_DSN": "u:p@tcp(127.0.0.1:3306)/tokens",
		"ADMIN_KEY":           "admin-secret",
		"INTERNAL_KEY":        "internal-secret",
	}
	tests := []struct {
		name    string
		set     map[string]string
		wantErr string // substring naming the variable; "" = valid
	}{
		{"OK", nil, ""},
		{"MissingDSN", map[string]string{"TOKENS_DATABASE_DSN": ""}, "TOKENS_DATABASE_DSN"},
		{"MissingAdminKey", map[string]string{"ADMIN_KEY": ""}, "ADMIN_KEY"},
		{"SameKeys", map[string]string{"INTERNAL_KEY": "admin-secret"}, "INTERNAL_KEY"},
		{"BadInterval", map[string]string{"TOKEN_LAST_USED_INTERVAL": "soon"}, "TOKEN_LAST_USED_INTERVAL"},
		{"BadAuditURL", map[string]string{"AUDITLOGGER_SERVICE_URL": "audit:8081"}, "AUDITLOGGER_SERVICE_URL"},
		{"AuditURL", map[string]string{"AUDITLOGGER_SERVICE_URL": "http://audit:8081"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.set {
				env[k] = v
			}
			var cfg Config
			err := config.Parse(func(k string) string { return env[k] }, &cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse() = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}
