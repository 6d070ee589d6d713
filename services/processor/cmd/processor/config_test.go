package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"threatview/platform/config"
	"threatview/platform/wire"
)

func TestConfig_EffectivePrefetch(t *testing.T) {
	old := debug.SetMemoryLimit(1 << 30)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	tests := []struct {
		name     string
		prefetch int
		budget   int64
		msg      int64
		want     int
	}{
		{"BudgetFromGOMEMLIMIT", 2000, 0, 1 << 20, 256}, // 1 GiB / 4 / 1 MiB
		{"ExplicitBudget", 2000, 64 << 20, 512 << 10, 128},
		{"CountIsLower", 50, 64 << 20, 512 << 10, 50},
		{"AtLeastOne", 2000, 1 << 10, 1 << 20, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Prefetch: tt.prefetch, PrefetchBytes: tt.budget, MessageBytes: tt.msg}
			if got := c.EffectivePrefetch(); got != tt.want {
				t.Fatalf("EffectivePrefetch(%d, %d, %d) = %d, want %d", tt.prefetch, tt.budget, tt.msg, got, tt.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	base := map[string]string{"EVENTS_DATABASE_URL": "postgres://u:p@h/db"}
	t.Run("Defaults", func(t *testing.T) {
		var c Config
		if err := config.Parse(func(k string) string { return base[k] }, &c); err != nil {
			t.Fatalf("Parse = %v", err)
		}
		if c.Queue != wire.EventsQueue || c.PartitionsAhead < 3 {
			t.Fatalf("defaults = %+v, want queue %s and at least 3 months of partitions ahead", c, wire.EventsQueue)
		}
	})
	for _, tc := range []struct{ name, value string }{
		{"PROCESSOR_PREFETCH", "0"},
		{"PROCESSOR_PREFETCH_BYTES", "-1"},
		{"PROCESSOR_MESSAGE_BYTES", "0"},
		{"PROCESSOR_BATCH_MAX_EVENTS", "-1"},
		{"PROCESSOR_PARTITIONS_AHEAD", "-1"},
		{"PROCESSOR_YIELD_CPU_PRESSURE", "101"},
		{"PROCESSOR_YIELD_MIN_RATE", "0"},
		{"PROCESSOR_DB_MAX_CONNS", "1"},
		{"PROCESSOR_LEADER_POLL", "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			err := config.Parse(func(k string) string {
				if k == tc.name {
					return tc.value
				}
				return base[k]
			}, &c)
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("Parse with %s=%s = %v, want an error naming it", tc.name, tc.value, err)
			}
		})
	}
}
