package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
)

// cmdSample prints generated events, one JSON document per line (or the
// first one indented with -pretty), so a reader can see what the load sends.
func cmdSample(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sample", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs, getenv)
	n := fs.Int("n", 5, "requests to print")
	pretty := fs.Bool("pretty", false, "indent (one request)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	gen, err := c.generator(0)
	if err != nil {
		return err
	}
	for i := 0; i < *n; i++ {
		req, err := gen.Next()
		if err != nil {
			return err
		}
		if *pretty {
			var v any
			if err := json.Unmarshal(req.Body, &v); err != nil {
				return err
			}
			b, _ := json.MarshalIndent(v, "", "  ")
			fmt.Fprintf(stdout, "%s\n", b)
			return nil
		}
		fmt.Fprintf(stdout, "%s\t%s\n", req.ClientIP, req.Body)
	}
	return nil
}
