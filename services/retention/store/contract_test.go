package store

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"

	"threatview/retention"
)

// testContract checks the Store behaviour the archiver relies on.
func testContract(t *testing.T, st retention.Store) {
	ctx := context.Background()
	get := func(key string) (string, error) {
		r, err := st.Get(ctx, key)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	t.Run("PutGet", func(t *testing.T) {
		for _, v := range []string{"one", "two"} {
			if err := st.Put(ctx, "t/2026-08/part-00001.ndjson.gz", []byte(v)); err != nil {
				t.Fatal(err)
			}
			if got, err := get("t/2026-08/part-00001.ndjson.gz"); err != nil || got != v {
				t.Errorf("Get = %q, %v; want %q", got, err, v)
			}
		}
	})
	t.Run("List", func(t *testing.T) {
		st.Put(ctx, "t/2026-08/manifest.json", []byte("{}"))
		st.Put(ctx, "t/2026-09/manifest.json", []byte("{}"))
		st.Put(ctx, "t/2026-080/manifest.json", []byte("{}"))
		keys, err := st.List(ctx, "t/2026-08/")
		want := []string{"t/2026-08/manifest.json", "t/2026-08/part-00001.ndjson.gz"}
		if err != nil || !reflect.DeepEqual(keys, want) {
			t.Errorf("List = %v, %v; want %v", keys, err, want)
		}
		if keys, err := st.List(ctx, "nothing/"); err != nil || len(keys) != 0 {
			t.Errorf("List(empty prefix) = %v, %v; want none", keys, err)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		if err := st.Delete(ctx, "t/2026-08/manifest.json"); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, "t/2026-08/manifest.json"); err != nil {
			t.Errorf("second Delete = %v, want nil", err)
		}
		if _, err := get("t/2026-08/manifest.json"); !errors.Is(err, retention.ErrNotFound) {
			t.Errorf("Get after Delete = %v, want ErrNotFound", err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := get("never/manifest.json"); !errors.Is(err, retention.ErrNotFound) {
			t.Errorf("Get(missing) = %v, want ErrNotFound", err)
		}
	})
}

func TestDir_Contract(t *testing.T) {
	d, err := NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testContract(t, d)
}
