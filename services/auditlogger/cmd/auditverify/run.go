package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/auditlogger/trail/s3store"
	"threatview/platform/config"
)

// Config is the verifier's configuration, read from the environment.
type Config struct {
	DatabaseDSN string `env:"AUDIT_DATABASE_DSN" secret:"true"`
	// PublicKeys are the trusted checkpoint keys (base64 Ed25519, comma
	// separated), from the chart's values, not from the database.
	PublicKeys string `env:"AUDIT_PUBLIC_KEYS"`
	// TrailDir holds the checkpoints and leaf bundles the worker wrote.
	TrailDir string `env:"AUDIT_TRAIL_DIR"`
	// TrailS3 is the bucket the worker writes them to (AUDIT_TRAIL_S3_*,
	// ARCHIVE_S3_*); with both set, the bucket is read.
	TrailS3 s3store.Env
	// AllCheckpoints reads every checkpoint in the object store (one GET
	// each) instead of the newest and the copy of the database's newest
	// trusted one.
	AllCheckpoints bool `env:"AUDITVERIFY_ALL_CHECKPOINTS" envDefault:"false"`
	// ArchiveDir is the retention archiver's directory target (or a copy of
	// its S3 bucket): archived months are verified row by row from it.
	ArchiveDir string `env:"AUDITVERIFY_ARCHIVE_DIR"`
	// Timeout bounds the whole verification.
	Timeout time.Duration `env:"AUDITVERIFY_TIMEOUT" envDefault:"30m"`
}

// Validate checks the relations between fields; the error names the variable.
func (c *Config) Validate() error {
	switch {
	case c.DatabaseDSN == "":
		return errors.New("AUDIT_DATABASE_DSN is required")
	case c.PublicKeys == "":
		return errors.New("AUDIT_PUBLIC_KEYS is required")
	case c.Timeout <= 0:
		return errors.New("AUDITVERIFY_TIMEOUT must be positive")
	}
	return nil
}

var errProblems = errors.New("the audit trail did not verify")

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	keys, err := trail.ParsePublicKeys(cfg.PublicKeys)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	db, err := mariadb.Open(cfg.DatabaseDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	src := mariadb.NewTrail(db)
	if err := src.LoadArchived(ctx); err != nil {
		return err
	}
	var source trail.Source = src
	if cfg.ArchiveDir != "" {
		rows, months, err := trail.ArchivedRows(cfg.ArchiveDir)
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		source = trail.WithArchive{Source: src, Archive: rows, Months: months}
	}
	var ref trail.Reference
	st, err := s3store.Open(ctx, cfg.TrailDir, cfg.TrailS3, nil)
	if err != nil {
		return err
	}
	if st != nil {
		ref = trail.StoreReference{Store: st, All: cfg.AllCheckpoints}
	}
	start := time.Now()
	rep, err := trail.Verify(ctx, source, ref, keys, trail.Options{MaxProblems: 1 << 30})
	if err != nil {
		return err
	}
	for _, p := range rep.Problems {
		t := ""
		if !p.Time.IsZero() {
			t = p.Time.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\n", p.Kind, p.ID, t, p.Detail)
	}
	cp := "none"
	if c := rep.Checkpoint; c != nil {
		cp = fmt.Sprintf("size %d root %s at %s (key %s)", c.Size, base64.StdEncoding.EncodeToString(c.Root),
			c.Time.Format(time.RFC3339), c.KeyID)
	}
	took := time.Since(start)
	fmt.Fprintf(stdout, "checked %d rows (%d archived, %d from before the trail) in %s against checkpoint %s: %d problems\n",
		rep.Checked, rep.Archived, rep.Unchained, took.Round(time.Millisecond), cp, len(rep.Problems))
	if !rep.OK {
		return errProblems
	}
	return nil
}
