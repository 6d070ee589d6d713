package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
)

func TestRun(t *testing.T) {
	ctx := context.Background()
	dsn, db := audittest.MustDB(t)
	signer := newSigner(t)
	dir := t.TempDir()
	recs := audittest.Records(50, time.Now().Add(-time.Hour))
	if _, err := mariadb.New(db).Insert(ctx, recs); err != nil {
		t.Fatal(err)
	}
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: trail.Dir{Root: dir}, Signer: signer}
	if _, err := cp.Once(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AUDIT_DATABASE_DSN": dsn, "AUDIT_TRAIL_DIR": dir,
		"AUDIT_PUBLIC_KEYS": base64.StdEncoding.EncodeToString(signer.Public())}
	var out bytes.Buffer
	t.Run("OK", func(t *testing.T) {
		out.Reset()
		if err := run(ctx, func(k string) string { return env[k] }, &out); err != nil || !strings.Contains(out.String(), "checked 50 rows") {
			t.Fatalf("run = %v, output %q", err, out.String())
		}
	})
	t.Run("ErrUnanchored", func(t *testing.T) {
		env2 := map[string]string{"AUDIT_DATABASE_DSN": dsn, "AUDIT_PUBLIC_KEYS": env["AUDIT_PUBLIC_KEYS"]}
		out.Reset()
		if err := run(ctx, func(k string) string { return env2[k] }, &out); !errors.Is(err, errProblems) || !strings.Contains(out.String(), "unanchored\tcheckpoints") {
			t.Fatalf("run without the object store = %v, output %q; want errProblems and an unanchored line", err, out.String())
		}
	})
	t.Run("ErrProblems", func(t *testing.T) {
		if _, err := db.Exec("DELETE FROM audit_events WHERE seq IN (3, 17)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("UPDATE audit_events SET user_agent = 'x' WHERE seq = 30"); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		err := run(ctx, func(k string) string { return env[k] }, &out)
		if !errors.Is(err, errProblems) {
			t.Fatalf("run = %v, want errProblems", err)
		}
		for _, want := range []string{"missing\t" + recs[3].ID, "missing\t" + recs[17].ID, "modified\t" + recs[30].ID} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
	t.Run("ErrForeignKeys", func(t *testing.T) {
		other := make([]byte, ed25519.PublicKeySize)
		_, _ = rand.Read(other)
		env2 := map[string]string{"AUDIT_DATABASE_DSN": dsn, "AUDIT_PUBLIC_KEYS": base64.StdEncoding.EncodeToString(other)}
		out.Reset()
		if err := run(ctx, func(k string) string { return env2[k] }, &out); !errors.Is(err, errProblems) || !strings.Contains(out.String(), "bad_signature") {
			t.Fatalf("run with another key = %v, output %q", err, out.String())
		}
	})
}

// newSigner returns a checkpoint signer with a fresh key.
func newSigner(t *testing.T) *trail.Signer {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	signer, _, err := trail.ParseSigningKeys(base64.StdEncoding.EncodeToString(seed))
	if err != nil {
		t.Fatal(err)
	}
	return signer
}
