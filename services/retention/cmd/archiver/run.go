package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"threatview/platform/config"
	"threatview/platform/logging"
	"threatview/retention"
	"threatview/retention/mariadb"
	"threatview/retention/postgres"
	"threatview/retention/store"
)

var version = "dev"

// crashEnv makes the archiver kill itself (SIGKILL) after storing that many
// chunk files; only the crash test sets it.
const crashEnv = "ARCHIVER_TEST_CRASH_AFTER_FILES"

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	restore := len(args) > 0 && args[0] == "restore"
	if restore {
		args = args[1:]
	}
	fs := flag.NewFlagSet("archiver", flag.ContinueOnError)
	fs.SetOutput(stdout)
	table := fs.String("table", "", "only this table (events.events, facts.facts, audit_events); required for restore")
	month := fs.String("month", "", "only this month, YYYY-MM; required for restore")
	force := fs.Bool("force", false, "archive months that already have an archive again, as a new version beside it (nothing is deleted)")
	late := fs.Bool("late", false, "archive the held late events (months archived and dropped) as supplementary archives beside the verified ones")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *late && (restore || *force) {
		err := errors.New("--late goes with neither restore nor --force")
		fmt.Fprintln(stdout, err)
		return err
	}
	var cfg retention.ArchiverConfig
	if err := config.Parse(getenv, &cfg); err != nil {
		fmt.Fprintln(stdout, err)
		return err
	}
	log := logging.New(stdout, "archiver", version, cfg.LogLevel)
	log.Info("config", "config", config.Masked(cfg))
	var m time.Time
	if *month != "" {
		var err error
		if m, err = retention.ParseMonth(*month); err != nil {
			log.Error("bad --month", "month", *month, "err", err)
			return err
		}
	}
	if restore && (*table == "" || m.IsZero()) {
		err := errors.New("restore needs --table and --month")
		log.Error("bad arguments", "err", err)
		return err
	}
	st, err := store.Open(ctx, cfg.Archive)
	if err != nil {
		log.Error("archive store", "err", err)
		return err
	}
	a := &retention.Archiver{Store: st, ChunkRows: cfg.ChunkRows, Log: log, Table: *table, Month: m, Force: *force, Late: *late}
	if n, _ := strconv.Atoi(getenv(crashEnv)); n > 0 {
		a.AfterFile = func(i int) {
			if i >= n {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
	}
	start := time.Now()
	var total retention.Summary
	var errs []error
	for _, open := range sources(ctx, cfg, *table) {
		src, err := open()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.Src = src
		var sum retention.Summary
		if restore {
			sum, err = a.Restore(ctx, *table, m)
		} else {
			sum, err = a.Run(ctx)
		}
		src.Close()
		total.Partitions += sum.Partitions
		total.Rows += sum.Rows
		total.Bytes += sum.Bytes
		if err != nil {
			errs = append(errs, fmt.Errorf("%s DB: %w", src.Name(), err))
		}
	}
	err = errors.Join(errs...)
	total.Seconds = time.Since(start).Seconds()
	if err != nil {
		log.Error("archiver failed", "err", err)
	}
	log.Info("summary", "restore", restore, "partitions", total.Partitions, "rows", total.Rows, "bytes", total.Bytes, "seconds", total.Seconds, "failed", err != nil)
	return err
}

// sources returns openers for the databases to work on: those configured,
// narrowed to the one holding table when it is set.
func sources(ctx context.Context, cfg retention.ArchiverConfig, table string) []func() (retention.Source, error) {
	var out []func() (retention.Source, error)
	audit := table == mariadb.Table
	if cfg.EventsDatabaseURL != "" && (table == "" || !audit) {
		out = append(out, func() (retention.Source, error) { return postgres.Open(ctx, cfg.EventsDatabaseURL) })
	}
	if cfg.AuditDatabaseDSN != "" && (table == "" || audit) {
		out = append(out, func() (retention.Source, error) { return mariadb.Open(ctx, cfg.AuditDatabaseDSN) })
	}
	if len(out) == 0 {
		out = append(out, func() (retention.Source, error) {
			return nil, fmt.Errorf("no database configured for table %q", table)
		})
	}
	return out
}
