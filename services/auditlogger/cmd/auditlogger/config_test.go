package main

import (
	"strings"
	"testing"

	"threatview/platform/config"
)

func TestConfig_Validate(t *testing.T) {
	base := map[string]string{
		"AUDIT_DATABASE_DSN": "u:p@tcp(127.0.0.1:3306)/audit",
		"ADMIN_KEY":          "admin-secret",
		"INTERNAL_KEY":       "internal-secret",
	}
	tests := []struct {
		name    string
		set     map[string]string
		wantErr string // substring naming the variable; "" = valid
	}{
		{"OK", nil, ""},
		{"MissingInternalKey", map[string]string{"INTERNAL_KEY": ""}, "INTERNAL_KEY"},
		{"MissingAdminKey", map[string]string{"ADMIN_KEY": ""}, "ADMIN_KEY"},
		// The internal key is held by every service that posts audit
		// records; equal keys would let any of them read the whole trail.
		{"SameKeys", map[string]string{"INTERNAL_KEY": "admin-secret"}, "INTERNAL_KEY"},
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
			if err == nil {
				err = cfg.Validate()
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse+Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse+Validate = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}
