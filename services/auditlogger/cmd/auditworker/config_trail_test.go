package main

import (
	"strings"
	"testing"

	"threatview/platform/config"
)

func TestConfig_CheckpointEvery(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "10s": true, "200ms": true, "11s": false, "50ms": false, "1m": false} {
		env := map[string]string{"AUDIT_DATABASE_DSN": "u:p@tcp(127.0.0.1:3306)/audit", "AUDITWORKER_CHECKPOINT_EVERY": v}
		var cfg Config
		err := config.Parse(func(k string) string { return env[k] }, &cfg)
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "AUDITWORKER_CHECKPOINT_EVERY")) {
			t.Errorf("AUDITWORKER_CHECKPOINT_EVERY=%q: Parse = %v, want ok %v", v, err, ok)
		}
	}
}
