package store

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"threatview/retention"
)

func TestDir(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		if err := d.Put(ctx, "events.events/2026-08/part-00001.ndjson.gz", []byte("one")); err != nil {
			t.Fatal(err)
		}
		if err := d.Put(ctx, "events.events/2026-08/manifest.json", []byte("m")); err != nil {
			t.Fatal(err)
		}
		if err := d.Put(ctx, "events.events/2026-09/manifest.json", []byte("x")); err != nil {
			t.Fatal(err)
		}
		// Replacing an object replaces it whole.
		if err := d.Put(ctx, "events.events/2026-08/part-00001.ndjson.gz", []byte("two")); err != nil {
			t.Fatal(err)
		}
		r, err := d.Get(ctx, "events.events/2026-08/part-00001.ndjson.gz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		if string(b) != "two" {
			t.Errorf("Get = %q, want %q", b, "two")
		}
		keys, err := d.List(ctx, "events.events/2026-08/")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"events.events/2026-08/manifest.json", "events.events/2026-08/part-00001.ndjson.gz"}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("List = %v, want %v", keys, want)
		}
		ents, _ := os.ReadDir(filepath.Join(root, "events.events", "2026-08"))
		if len(ents) != 2 {
			t.Errorf("directory holds %d entries, want 2 (no temporary files left)", len(ents))
		}
		if err := d.Delete(ctx, "events.events/2026-08/manifest.json"); err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(ctx, "events.events/2026-08/manifest.json"); err != nil {
			t.Errorf("Delete of a missing key = %v, want nil", err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := d.Get(ctx, "nope/manifest.json")
		if !errors.Is(err, retention.ErrNotFound) {
			t.Errorf("Get(missing) = %v, want ErrNotFound", err)
		}
		keys, err := d.List(ctx, "nope/")
		if err != nil || len(keys) != 0 {
			t.Errorf("List(missing) = %v, %v, want none", keys, err)
		}
	})
	t.Run("BadKey", func(t *testing.T) {
		if err := d.Put(ctx, "../escape", []byte("x")); err == nil {
			t.Errorf("Put(../escape) = nil, want an error")
		}
	})
	t.Run("TempFilesListed", func(t *testing.T) {
		// A crash between create and rename leaves a .tmp- file; List shows it
		// so the archiver's clean-up removes it.
		dir := filepath.Join(root, "facts.facts", "2026-08")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, ".tmp-abc-part-00001.ndjson.gz"), []byte("half"), 0o644)
		keys, _ := d.List(ctx, "facts.facts/2026-08/")
		if len(keys) != 1 {
			t.Fatalf("List = %v, want the temporary file", keys)
		}
		if err := d.Delete(ctx, keys[0]); err != nil {
			t.Fatal(err)
		}
		if keys, _ := d.List(ctx, "facts.facts/2026-08/"); len(keys) != 0 {
			t.Errorf("after Delete, List = %v", keys)
		}
	})
}
