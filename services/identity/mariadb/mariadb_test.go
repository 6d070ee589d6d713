package mariadb_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"threatview/identity"
	"threatview/identity/mariadb"
	"threatview/migrations"
	"threatview/platform/testenv"
)

func newStore(t *testing.T) *mariadb.Store {
	t.Helper()
	db, err := mariadb.Open(testenv.MustMariaDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrations.Up(context.Background(), db, migrations.Identity); err != nil {
		t.Fatal(err)
	}
	return mariadb.New(db)
}

func TestStore_CountAttempt(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	keys := []string{"user:ann", "ip:10.0.0.1"}
	var w map[string]identity.Window
	var err error
	for i := range 3 {
		if w, err = s.CountAttempt(ctx, keys, time.Minute, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if w["user:ann"].Attempts != 3 || !w["user:ann"].Start.Equal(t0) {
		t.Fatalf("after 3 attempts: %+v, want 3 from %s", w["user:ann"], t0)
	}
	if err := s.Forgive(ctx, keys[1:]); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetFailures(ctx, keys[:1]); err != nil {
		t.Fatal(err)
	}
	if w, err = s.CountAttempt(ctx, keys, time.Minute, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if w["user:ann"].Attempts != 1 || w["ip:10.0.0.1"].Attempts != 3 {
		t.Fatalf("after forgive and reset: %+v, want user 1, ip 3", w)
	}
	// The window closes: counting starts over.
	late := t0.Add(2 * time.Minute)
	if w, err = s.CountAttempt(ctx, keys, time.Minute, late); err != nil {
		t.Fatal(err)
	}
	if w["ip:10.0.0.1"].Attempts != 1 || !w["ip:10.0.0.1"].Start.Equal(late) {
		t.Fatalf("after the window: %+v, want 1 from %s", w["ip:10.0.0.1"], late)
	}
}

func TestStore_RotateRefresh(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if err := s.CreateUser(ctx, identity.User{Username: "ann", Source: identity.SourceLocal, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	h := func(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }
	rt := func(s string, exp time.Time) identity.RefreshToken {
		return identity.RefreshToken{Hash: h(s), FamilyID: "fam-1", Username: "ann", CreatedAt: now, ExpiresAt: exp}
	}
	if err := s.CreateRefresh(ctx, rt("one", now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	old, _, err := s.RotateRefresh(ctx, h("one"), rt("two", now.Add(time.Hour)), now, 0)
	if err != nil || old.Username != "ann" || old.FamilyID != "fam-1" {
		t.Fatalf("RotateRefresh(one) = %+v, %v", old, err)
	}
	// "one" again: reuse, so the family ("two" too) is revoked.
	if _, _, err := s.RotateRefresh(ctx, h("one"), rt("three", now.Add(time.Hour)), now, 0); !errors.Is(err, identity.ErrBadCredentials) {
		t.Fatalf("RotateRefresh(one) again = %v, want ErrBadCredentials", err)
	}
	if _, _, err := s.RotateRefresh(ctx, h("two"), rt("four", now.Add(time.Hour)), now, 0); !errors.Is(err, identity.ErrBadCredentials) {
		t.Fatalf("RotateRefresh(two) after reuse = %v, want ErrBadCredentials", err)
	}
	if err := s.CreateRefresh(ctx, identity.RefreshToken{Hash: h("old"), FamilyID: "fam-2", Username: "ann", CreatedAt: now, ExpiresAt: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RotateRefresh(ctx, h("old"), rt("five", now.Add(time.Hour)), now, 0); !errors.Is(err, identity.ErrBadCredentials) {
		t.Fatalf("RotateRefresh(expired) = %v, want ErrBadCredentials", err)
	}
	if _, _, err := s.RotateRefresh(ctx, h("unknown"), rt("six", now.Add(time.Hour)), now, 0); !errors.Is(err, identity.ErrBadCredentials) {
		t.Fatalf("RotateRefresh(unknown) = %v, want ErrBadCredentials", err)
	}

	// Two page loads at once present the same token: within the grace the
	// second gets a sibling and both go on; after it, reuse is theft.
	g := func(s string) identity.RefreshToken {
		t := rt(s, now.Add(time.Hour))
		t.FamilyID = "fam-3"
		return t
	}
	if err := s.CreateRefresh(ctx, g("g1")); err != nil {
		t.Fatal(err)
	}
	const grace = 10 * time.Second
	if _, _, err := s.RotateRefresh(ctx, h("g1"), g("g2"), now, grace); err != nil {
		t.Fatalf("RotateRefresh(g1) = %v", err)
	}
	if _, _, err := s.RotateRefresh(ctx, h("g1"), g("g3"), now.Add(5*time.Second), grace); err != nil {
		t.Fatalf("RotateRefresh(g1) again within the grace = %v, want a sibling", err)
	}
	if _, _, err := s.RotateRefresh(ctx, h("g2"), g("g4"), now.Add(6*time.Second), grace); err != nil {
		t.Fatalf("RotateRefresh(g2) = %v", err)
	}
	if _, _, err := s.RotateRefresh(ctx, h("g1"), g("g5"), now.Add(11*time.Second), grace); !errors.Is(err, identity.ErrBadCredentials) {
		t.Fatalf("RotateRefresh(g1) after the grace = %v, want ErrBadCredentials", err)
	}
	if _, _, err := s.RotateRefresh(ctx, h("g4"), g("g6"), now.Add(12*time.Second), grace); !errors.Is(err, identity.ErrBadCredentials) {
		t.Fatalf("RotateRefresh(g4) after the family was revoked = %v, want ErrBadCredentials", err)
	}
}
