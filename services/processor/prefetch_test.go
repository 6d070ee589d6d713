package processor_test

import (
	"runtime/debug"
	"testing"

	"threatview/processor"
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
			c := processor.Config{Prefetch: tt.prefetch, PrefetchBytes: tt.budget, MessageBytes: tt.msg}
			if got := c.EffectivePrefetch(); got != tt.want {
				t.Fatalf("EffectivePrefetch(%d, %d, %d) = %d, want %d", tt.prefetch, tt.budget, tt.msg, got, tt.want)
			}
		})
	}
}
