package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestRun_LateArgs(t *testing.T) {
	for _, args := range [][]string{{"--late", "--force"}, {"restore", "--late", "--table", "events.events", "--month", "2026-01"}} {
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--late") {
			t.Errorf("run(%q) = %v, want an error naming --late", args, err)
		}
	}
}
