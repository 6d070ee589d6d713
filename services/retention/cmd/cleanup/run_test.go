package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"threatview/migrations"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/mariadb"
	"threatview/retention/postgres"
)

func TestRun(t *testing.T) {
	ctx := context.Background()
	url, pg := retentiontest.Postgres(t)
	dsn, my := retentiontest.MariaDB(t)
	retentiontest.FillPostgres(t, pg, retentiontest.Month(-2), 5)
	retentiontest.FillMariaDB(t, my, retentiontest.Month(-2), 5)
	old := retentiontest.Month(-2)
	oldPG := fmt.Sprintf("events_y%04dm%02d", old.Year(), int(old.Month()))
	oldMy := migrations.AuditPartitionName(old)
	base := map[string]string{
		"EVENTS_DATABASE_URL": url, "AUDIT_DATABASE_DSN": dsn,
		"CLEANUP_EVENTS_RETENTION_MONTHS": "1", "CLEANUP_AUDIT_RETENTION_MONTHS": "1",
	}
	count := func() (int, int) {
		src, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		msrc, err := mariadb.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer msrc.Close()
		return len(retentiontest.Names(t, src, "events.events")), len(retentiontest.Names(t, msrc, mariadb.Table))
	}
	pg0, my0 := count()
	exec := func(extra map[string]string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}, &out)
		return out.String(), err
	}

	t.Run("Disabled", func(t *testing.T) {
		if out, err := exec(nil); err != nil || !strings.Contains(out, "cleanup disabled") {
			t.Errorf("run = %v, want a no-op\n%s", err, out)
		}
		if p, m := count(); p != pg0 || m != my0 {
			t.Errorf("disabled cleanup changed partitions: %d/%d, want %d/%d", p, m, pg0, my0)
		}
	})
	t.Run("ErrUnarchived", func(t *testing.T) {
		out, err := exec(map[string]string{"CLEANUP_ENABLED": "true", "ARCHIVE_TARGET": "dir://" + t.TempDir()})
		if err == nil {
			t.Fatalf("run = nil, want an error (archive required, none there)\n%s", out)
		}
		for _, n := range []string{oldPG, oldMy} {
			if !strings.Contains(out, n) {
				t.Errorf("output does not name %s:\n%s", n, out)
			}
		}
		if p, m := count(); p != pg0 || m != my0 {
			t.Errorf("refused cleanup changed partitions: %d/%d, want %d/%d", p, m, pg0, my0)
		}
	})
	t.Run("DryRun", func(t *testing.T) {
		out, err := exec(map[string]string{"CLEANUP_ENABLED": "true"}, "--dry-run")
		if err != nil || !strings.Contains(out, "would drop partition") || !strings.Contains(out, oldPG) {
			t.Errorf("dry run = %v, want a list naming %s\n%s", err, oldPG, out)
		}
		if p, m := count(); p != pg0 || m != my0 {
			t.Errorf("dry run changed partitions: %d/%d, want %d/%d", p, m, pg0, my0)
		}
	})
	t.Run("OK", func(t *testing.T) {
		out, err := exec(map[string]string{"CLEANUP_ENABLED": "true"})
		if err != nil || !strings.Contains(out, `"msg":"summary"`) {
			t.Fatalf("run = %v\n%s", err, out)
		}
		// Months -3 and -2 go in both databases.
		if p, m := count(); p != pg0-2 || m != my0-2 {
			t.Errorf("after cleanup %d/%d partitions, want %d/%d", p, m, pg0-2, my0-2)
		}
	})
}
