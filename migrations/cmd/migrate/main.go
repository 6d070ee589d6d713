// Command migrate applies the embedded migrations to Threat View's databases
// and creates the monthly partitions ahead. It runs once and exits non-zero
// on failure (locally from `make up`, in Kubernetes as a Helm hook Job).
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"threatview/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fl := flag.NewFlagSet("migrate", flag.ContinueOnError)
	which := fl.String("db", "all", "database to migrate: events, audit, tokens, identity or all")
	ahead := fl.Int("ahead", 3, "months of partitions to create after the current one")
	if err := fl.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "migrate")
	targets := migrations.Targets
	if *which != "all" {
		targets = []migrations.Target{migrations.Target(*which)}
	}
	for _, t := range targets {
		driver, envName := "mysql", ""
		switch t {
		case migrations.Events:
			driver, envName = "pgx", "EVENTS_DATABASE_URL"
		case migrations.Audit:
			envName = "AUDIT_DATABASE_DSN"
		case migrations.Tokens:
			envName = "TOKENS_DATABASE_DSN"
		case migrations.Identity:
			envName = "IDENTITY_DATABASE_DSN"
		default:
			return fmt.Errorf("-db %q: want events, audit, tokens, identity or all", *which)
		}
		dsn := getenv(envName)
		if dsn == "" && t == migrations.Identity && *which == "all" {
			// Deployments without the identity service have no identity
			// database; -db identity still insists.
			log.Warn("skipped: IDENTITY_DATABASE_DSN is not set", "db", string(t))
			continue
		}
		if dsn == "" {
			return fmt.Errorf("%s is not set (needed to migrate the %s database)", envName, t)
		}
		if err := migrate(ctx, driver, dsn, t, *ahead, log); err != nil {
			return err
		}
	}
	return nil
}

func migrate(ctx context.Context, driver, dsn string, t migrations.Target, ahead int, log *slog.Logger) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return fmt.Errorf("open %s database: %w", t, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	applied, err := migrations.Up(ctx, db, t)
	if err != nil {
		return err
	}
	parts := 0
	switch t {
	case migrations.Events:
		parts, err = migrations.MaintainEventPartitions(ctx, db, ahead)
	case migrations.Audit:
		parts, err = migrations.EnsureAuditPartitions(ctx, db, time.Now(), ahead)
	}
	if err != nil {
		return err
	}
	log.Info("migrated", "db", string(t), "applied", applied, "partitions_created", parts)
	return nil
}
