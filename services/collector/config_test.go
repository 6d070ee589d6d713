package collector_test

import (
	"strings"
	"testing"

	"threatview/collector"
	"threatview/platform/config"
)

func TestConfig_MaxBodyBytesInFlight(t *testing.T) {
	env := map[string]string{"INTERNAL_KEY": "k"}
	for _, tt := range []struct {
		value string
		ok    bool
	}{{"", true}, {"0", true}, {"1048576", true}, {"268435456", true}, {"1000", false}, {"-1", false}} {
		env["COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT"] = tt.value
		var c collector.Config
		err := config.Parse(func(k string) string { return env[k] }, &c)
		if tt.ok && err != nil {
			t.Errorf("COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT=%q: %v, want nil", tt.value, err)
		}
		if !tt.ok && (err == nil || !strings.Contains(err.Error(), "COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT")) {
			t.Errorf("COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT=%q: %v, want an error naming it", tt.value, err)
		}
	}
}
