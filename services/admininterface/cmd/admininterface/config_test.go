package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"threatview/platform/config"
)

func validEnv() map[string]string {
	return map[string]string{
		"IDENTITY_SERVICE_URL": "http://127.0.0.1:8085", "TOKENS_SERVICE_URL": "http://127.0.0.1:8083",
		"AUDITLOGGER_SERVICE_URL": "http://127.0.0.1:8081", "INTERNAL_KEY": "k",
		"ADMINUI_SESSION_KEY": strings.Repeat("0f", 32), "ADMINUI_COLLECTOR_PUBLIC_URL": "https://collector.example",
		"ADMINUI_STATUS_TARGETS": "collector=http://127.0.0.1:8080",
	}
}

func TestConfig_Validate(t *testing.T) {
	cases := []struct {
		name, key, val, want string
	}{
		{"OK", "", "", ""},
		{"ShortSessionKey", "ADMINUI_SESSION_KEY", "abcd", "ADMINUI_SESSION_KEY"},
		{"NotHexSessionKey", "ADMINUI_SESSION_KEY", strings.Repeat("zz", 32), "ADMINUI_SESSION_KEY"},
		{"BadTarget", "ADMINUI_STATUS_TARGETS", "collector", "ADMINUI_STATUS_TARGETS"},
		{"BadURL", "TOKENS_SERVICE_URL", "tokens:8083", "TOKENS_SERVICE_URL"},
		{"BadPrivacyURL", "PRIVACY_SERVICE_URL", "privacy:8088", "PRIVACY_SERVICE_URL"},
		{"Missing", "IDENTITY_SERVICE_URL", "", "IDENTITY_SERVICE_URL"},
		{"SampleTooOften", "ADMINUI_SAMPLE_INTERVAL", "10ms", "ADMINUI_SAMPLE_INTERVAL"},
		{"NotABool", "ADMINUI_SECURE_COOKIES", "maybe", "ADMINUI_SECURE_COOKIES"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := validEnv()
			if c.key != "" {
				env[c.key] = c.val
			}
			var cfg Config
			err := config.Parse(func(k string) string { return env[k] }, &cfg)
			if c.want == "" {
				if err != nil || !cfg.SecureCookies {
					t.Fatalf("Parse(valid) = %v, SecureCookies %v; want nil, true by default", err, cfg.SecureCookies)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse with %s=%q = %v, want an error naming %s", c.key, c.val, err, c.want)
			}
		})
	}
}

// TestConfig_LocalStackVars checks that every variable the local stack's
// scripts/svc/admininterface.sh sets is one the service reads.
func TestConfig_LocalStackVars(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "scripts", "svc", "admininterface.sh"))
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
				walk(f.Type)
				continue
			}
			read[strings.Split(f.Tag.Get("env"), ",")[0]] = true
		}
	}
	walk(reflect.TypeOf(Config{}))
	set := regexp.MustCompile(`(?m)^(?:export )?([A-Z_][A-Z0-9_]*)=`).FindAllStringSubmatch(string(script), -1)
	if len(set) < 5 {
		t.Fatalf("found only %d variables in the script", len(set))
	}
	for _, m := range set {
		if !read[m[1]] {
			t.Errorf("scripts/svc/admininterface.sh sets %s, which Config does not read", m[1])
		}
	}
}
