// Command collector is the data collector: the HTTP ingest API that makes
// app events durable on the broker before it answers 202.
package main

import (
	"context"
	"io"

	"threatview/platform/cli"
)

func main() {
	cli.Main("collector", func(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
		return run(ctx, getenv, stdout, nil)
	})
}
