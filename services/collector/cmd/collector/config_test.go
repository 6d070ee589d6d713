package main

import (
	"strings"
	"testing"
	"time"

	"threatview/platform/config"
	"threatview/platform/wire"
)

func TestConfig_MaxBodyBytesInFlight(t *testing.T) {
	env := map[string]string{"INTERNAL_KEY": "k"}
	for _, tt := range []struct {
		value string
		ok    bool
	}{{"", true}, {"0", true}, {"1048576", true}, {"268435456", true}, {"1000", false}, {"-1", false}} {
		env["COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT"] = tt.value
		var c Config
		err := config.Parse(func(k string) string { return env[k] }, &c)
		if tt.ok && err != nil {
			t.Errorf("COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT=%q: %v, want nil", tt.value, err)
		}
		if !tt.ok && (err == nil || !strings.Contains(err.Error(), "COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT")) {
			t.Errorf("COLLECTOR_MAX_BODY_BYTES_IN_FLIGHT=%q: %v, want an error naming it", tt.value, err)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	base := func() Config {
		return Config{InternalKey: "k", TokensURL: "http://x", EventsQueue: wire.EventsQueue, Shards: 1, MaxInFlight: 1,
			MaxMessageBytes: 1 << 20, MaxMessageEvents: 1000, PublishTimeout: time.Second, AuditTimeout: time.Second, RetryAfter: time.Second, TokensWarmLimit: 1000, LocationGrid: 0.1}
	}
	if err := (func() *Config { c := base(); return &c })().Validate(); err != nil {
		t.Fatalf("Validate(base) = %v", err)
	}
	bad := map[string]func(*Config){
		"INTERNAL_KEY":                 func(c *Config) { c.InternalKey = "" },
		"COLLECTOR_TRUSTED_PROXIES":    func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/99"} },
		"COLLECTOR_EVENTS_QUEUE":       func(c *Config) { c.EventsQueue = "events" },
		"COLLECTOR_RATE_BURST":         func(c *Config) { c.RateLimit = 5; c.RateBurst = 0 },
		"COLLECTOR_COALESCE_FULL_RATE": func(c *Config) { c.CoalesceFullRate = -1 },
		"TOKENS_WARM_LIMIT":            func(c *Config) { c.TokensWarmLimit = 100_001 },
		"COLLECTOR_LOCATION_GRID":      func(c *Config) { c.LocationGrid = 0 },
		"COLLECTOR_USER_ID_KEYS":       func(c *Config) { c.UserIDKeys = "k1:0011" },
		"COLLECTOR_SHARDS":             func(c *Config) { c.Shards = 0 },
	}
	for name, mutate := range bad {
		c := base()
		mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate with bad %s = %v, want an error naming it", name, err)
		}
	}
}
