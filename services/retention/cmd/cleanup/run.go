package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"threatview/platform/config"
	"threatview/platform/logging"
	"threatview/retention"
	"threatview/retention/mariadb"
	"threatview/retention/postgres"
	"threatview/retention/store"
)

var version = "dev"

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	fs.SetOutput(stdout)
	dryRun := fs.Bool("dry-run", false, "list the partitions cleanup would drop; drop nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg retention.CleanupConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		fmt.Fprintln(stdout, err)
		return err
	}
	log := logging.New(stdout, "cleanup", version, cfg.LogLevel)
	log.Info("config", "config", config.Masked(cfg), "dry_run", *dryRun)
	if !cfg.Enabled && !*dryRun {
		log.Info("cleanup disabled", "hint", "set CLEANUP_ENABLED=true")
		return nil
	}
	err := cleanup(ctx, cfg, *dryRun, log)
	if err != nil {
		log.Error("cleanup failed", "err", err)
	}
	return err
}

func cleanup(ctx context.Context, cfg retention.CleanupConfig, dryRun bool, log *slog.Logger) error {
	start := time.Now()
	var st retention.Store
	if cfg.Archive.Kind() != "" {
		s, err := store.Open(ctx, cfg.Archive)
		if err != nil {
			return err
		}
		st = s
	}
	type target struct {
		open   func() (retention.Source, error)
		months int
	}
	var targets []target
	if cfg.EventsDatabaseURL != "" {
		targets = append(targets, target{func() (retention.Source, error) { return postgres.Open(ctx, cfg.EventsDatabaseURL) }, cfg.EventsRetentionMonths})
	}
	if cfg.AuditDatabaseDSN != "" {
		targets = append(targets, target{func() (retention.Source, error) { return mariadb.Open(ctx, cfg.AuditDatabaseDSN) }, cfg.AuditRetentionMonths})
	}
	var total retention.Summary
	var errs []error
	for _, t := range targets {
		src, err := t.open()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c := &retention.Cleaner{Src: src, Months: t.months, RequireArchive: cfg.ArchiveRequired(), Store: st, DryRun: dryRun, Log: log}
		res, err := c.Run(ctx)
		src.Close()
		total.Partitions += res.Summary.Partitions
		total.Rows += res.Summary.Rows
		total.Bytes += res.Summary.Bytes
		if err != nil {
			errs = append(errs, fmt.Errorf("%s DB: %w", src.Name(), err))
		}
	}
	total.Seconds = time.Since(start).Seconds()
	log.Info("summary", "dry_run", dryRun, "partitions", total.Partitions, "rows", total.Rows, "bytes", total.Bytes, "seconds", total.Seconds, "failed", len(errs) > 0)
	return errors.Join(errs...)
}
