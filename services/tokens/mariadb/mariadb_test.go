package mariadb_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"threatview/migrations"
	"threatview/platform/testenv"
	"threatview/tokens"
	"threatview/tokens/mariadb"
)

func newStore(t testing.TB) *mariadb.Store {
	st, _ := newStoreDB(t)
	return st
}

// newStoreDB is newStore with its database handle.
func newStoreDB(t testing.TB) (*mariadb.Store, *sql.DB) {
	t.Helper()
	db, err := mariadb.Open(testenv.MustMariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(context.Background(), db, migrations.Tokens); err != nil {
		t.Fatal(err)
	}
	return mariadb.New(db), db
}

func newToken(t *testing.T, app string) tokens.Token {
	t.Helper()
	_, h, err := tokens.NewPlain()
	if err != nil {
		t.Fatal(err)
	}
	return tokens.Token{ID: uuid.NewString(), AppID: app, Name: "n", Hash: h,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

func TestStore_Create(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Run("OK", func(t *testing.T) {
		tk := newToken(t, "a")
		if err := s.Create(ctx, tk, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.ByHash(ctx, tk.Hash)
		if err != nil || got.ID != tk.ID || got.Hash != tk.Hash || !got.CreatedAt.Equal(tk.CreatedAt) || !got.Active() {
			t.Fatalf("ByHash() = %+v, %v, want %+v", got, err, tk)
		}
	})
	t.Run("ConfirmFails", func(t *testing.T) {
		tk := newToken(t, "a")
		boom := errors.New("audit down")
		if err := s.Create(ctx, tk, func(context.Context) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("Create() = %v, want the confirm error", err)
		}
		if _, err := s.Get(ctx, tk.ID); !errors.Is(err, tokens.ErrNotFound) {
			t.Fatalf("Get() after a failed confirm = %v, want ErrNotFound (rolled back)", err)
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		tk := newToken(t, "a")
		if err := s.Create(ctx, tk, nil); err != nil {
			t.Fatal(err)
		}
		dup := newToken(t, "b")
		dup.Hash = tk.Hash
		if err := s.Create(ctx, dup, nil); !errors.Is(err, tokens.ErrConflict) {
			t.Fatalf("Create(same hash) = %v, want ErrConflict", err)
		}
	})
}

func TestStore_NotFound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Get(ctx, uuid.NewString()); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.Revoke(ctx, uuid.NewString(), time.Now()); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Revoke(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.ByHash(ctx, [32]byte{1}); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("ByHash(unknown) = %v, want ErrNotFound", err)
	}
}

func TestStore_TouchLastUsed(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tk := newToken(t, "a")
	if err := s.Create(ctx, tk, nil); err != nil {
		t.Fatal(err)
	}
	later := tk.CreatedAt.Add(time.Hour)
	if err := s.TouchLastUsed(ctx, map[string]time.Time{tk.ID: later}); err != nil {
		t.Fatal(err)
	}
	// A replica writing an older use never lowers it.
	if err := s.TouchLastUsed(ctx, map[string]time.Time{tk.ID: tk.CreatedAt, uuid.NewString(): later}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, tk.ID)
	if err != nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(later) {
		t.Fatalf("last_used_at = %v, %v, want %v", got.LastUsedAt, err, later)
	}
}

// BenchmarkStore_Active measures the collector's warm-up query: the 50,000
// most recently used of 60,000 active tokens (a quarter never used).
func BenchmarkStore_Active(b *testing.B) {
	s, db := newStoreDB(b)
	const n = 60_000
	now := time.Now().UTC()
	for start := 0; start < n; start += 1000 {
		q := "INSERT INTO tokens (id, app_id, name, token_hash, created_at, last_used_at) VALUES "
		args := make([]any, 0, 6000)
		for i := start; i < start+1000; i++ {
			if i > start {
				q += ","
			}
			q += "(?, ?, '', ?, ?, ?)"
			_, h, err := tokens.NewPlain()
			if err != nil {
				b.Fatal(err)
			}
			var used any
			if i%4 != 0 {
				used = now.Add(-time.Duration(i) * time.Second)
			}
			args = append(args, uuid.NewString(), "bench-app", h[:], now.Add(-time.Duration(n+i)*time.Second), used)
		}
		if _, err := db.Exec(q, args...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.Active(context.Background(), 50_000)
		if err != nil || len(got) != 50_000 {
			b.Fatalf("Active() = %d tokens, %v", len(got), err)
		}
	}
}
