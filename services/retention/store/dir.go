// Package store holds the archive targets: a directory (a Kubernetes volume)
// and any S3-compatible object store.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"threatview/retention"
)

// Dir is a Store in a local directory. Put writes a temporary file in the
// same directory, syncs it and renames it into place, so an object is there
// whole or not at all; temporary names start with ".tmp-" and are never
// listed.
type Dir struct {
	root string
}

// NewDir returns a Store rooted at dir, creating it if needed.
func NewDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("archive dir: %w", err)
	}
	return &Dir{root: dir}, nil
}

func (d *Dir) path(key string) (string, error) {
	clean := filepath.Clean("/" + key)
	if clean == "/" || strings.Contains(key, "..") {
		return "", fmt.Errorf("bad archive key %q", key)
	}
	return filepath.Join(d.root, filepath.FromSlash(clean)), nil
}

// Put writes data under key atomically.
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := d.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := filepath.Join(dir, ".tmp-"+hex.EncodeToString(b)+"-"+filepath.Base(p))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", key, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Get opens the object under key.
func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, retention.ErrNotFound)
	}
	return f, err
}

// List returns the keys under prefix (temporary files included under their
// own names, so a re-run can remove what a crash left), sorted.
func (d *Dir) List(ctx context.Context, prefix string) ([]string, error) {
	dirKey := prefix
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dirKey = prefix[:i+1]
	} else {
		dirKey = ""
	}
	base := d.root
	if dirKey != "" {
		p, err := d.path(dirKey)
		if err != nil {
			return nil, err
		}
		base = p
	}
	var keys []string
	err := filepath.WalkDir(base, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(d.root, path)
		if err != nil {
			return err
		}
		k := filepath.ToSlash(rel)
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	sort.Strings(keys)
	return keys, err
}

// Delete removes key; a missing key is fine.
func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Location renders key as a dir:// URL.
func (d *Dir) Location(key string) string {
	return "dir://" + filepath.ToSlash(filepath.Join(d.root, key))
}

// Open returns the Store cfg names (cfg must be resolved).
func Open(ctx context.Context, cfg retention.TargetConfig) (retention.Store, error) {
	switch cfg.Kind() {
	case "dir":
		return NewDir(cfg.Dir)
	case "s3":
		return NewS3(ctx, cfg)
	}
	return nil, fmt.Errorf("archiving is off (ARCHIVE_TARGET is blank)")
}
