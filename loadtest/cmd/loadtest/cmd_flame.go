package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/pprof/profile"

	"threatview/loadtest/flame"
)

func cmdFlame(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flame", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "CPU profile (pprof format, as /debug/pprof/profile serves it); required")
	out := fs.String("o", "", "SVG to write; required")
	title := fs.String("title", "", "heading of the graph (default: the profile's file name)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return errors.New("-in and -o are required")
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	p, err := profile.Parse(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if *title == "" {
		*title = filepath.Base(*in)
	}
	var b bytes.Buffer
	if err := flame.SVG(p, *title, &b); err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}
