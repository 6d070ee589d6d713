package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/api"
	"threatview/platform/auditclient"
	"threatview/platform/authz"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/wire"
	"threatview/retention"
	"threatview/retention/mariadb"
	"threatview/retention/postgres"
	"threatview/retention/privacy"
	"threatview/retention/store"
)

var version = "dev"

// run serves the privacy API and runs erasures until ctx ends.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "privacy", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	pcfg, err := pgxpool.ParseConfig(cfg.EventsDatabaseURL)
	if err != nil {
		return fmt.Errorf("parse EVENTS_DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = 4
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("open events DB: %w", err)
	}
	defer pool.Close()
	checks := map[string]httpserver.Check{"postgres": pool.Ping}

	var redactor privacy.Redactor
	if cfg.AuditDatabaseDSN != "" {
		mc, err := mysql.ParseDSN(cfg.AuditDatabaseDSN)
		if err != nil {
			return fmt.Errorf("parse AUDIT_DATABASE_DSN: %w", err)
		}
		conn, err := mysql.NewConnector(mc)
		if err != nil {
			return fmt.Errorf("AUDIT_DATABASE_DSN: %w", err)
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(2)
		defer db.Close()
		redactor = privacy.NewAuditDB(db)
		checks["mariadb"] = db.PingContext
	} else {
		log.Warn("AUDIT_DATABASE_DSN is blank: audit bodies are not redacted")
	}
	var auditor privacy.Auditor
	if cfg.AuditURL != "" {
		auditor = auditclient.New(cfg.AuditURL, cfg.InternalKey, auditclient.Options{})
	} else {
		log.Warn("AUDITLOGGER_SERVICE_URL is blank: erasure requests are not audited")
	}
	var people *authz.Verifier
	if cfg.IdentityJWKSURL != "" {
		people = authz.NewVerifier(authz.NewJWKS(cfg.IdentityJWKSURL, 0, nil))
	}

	reg := httpserver.NewRegistry()
	pg := privacy.NewPG(pool)
	runner := privacy.NewRunner(pg, redactor, privacy.RunnerConfig{BatchRows: cfg.BatchRows, Settle: cfg.Settle,
		Poll: cfg.Poll, MaxBackoff: cfg.MaxBackoff, MaxAttempts: cfg.MaxAttempts}, privacy.NewMetrics(reg), log)

	if target := cfg.Archive(); target.Kind() != "" {
		if err := target.Resolve(); err != nil {
			return err
		}
		st, err := store.Open(ctx, target)
		if err != nil {
			return fmt.Errorf("archive store: %w", err)
		}
		src, err := postgres.OpenLazy(cfg.EventsDatabaseURL)
		if err != nil {
			return fmt.Errorf("open events DB for archives: %w", err)
		}
		defer src.Close()
		w := &privacy.ArchiveRewriter{Audit: auditor, Log: log, Rollups: pg,
			Archiver: &retention.Archiver{Src: src, Store: st, ChunkRows: cfg.ArchiveChunkRows, Log: log}}
		if cfg.AuditDatabaseDSN != "" {
			asrc, err := mariadb.OpenLazy(cfg.AuditDatabaseDSN)
			if err != nil {
				return fmt.Errorf("open audit DB for archives: %w", err)
			}
			defer asrc.Close()
			w.AuditArchiver = &retention.Archiver{Src: asrc, Store: st, ChunkRows: cfg.ArchiveChunkRows, Log: log}
		}
		runner.WithArchives(w)
	} else {
		log.Warn("ARCHIVE_TARGET is blank: archives are not rewritten by erasures")
	}

	users, err := wire.ParsePseudonymKeys(cfg.UserIDKeys)
	if err != nil {
		return fmt.Errorf("PRIVACY_USER_ID_KEYS: %w", err)
	}
	if users == nil {
		log.Warn("no user id keys (PRIVACY_USER_ID_KEYS): erasures by user id are refused")
	}
	r := privacy.NewAPI(pg, auditor, runner, log).WithUserKeys(users).Handler(authz.New(people, cfg.AdminKey, log), reg, checks, api.Privacy)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { _ = runner.Run(ctx, pool) })
	err = httpserver.Run(ctx, cfg.HTTP, defaultAddr, r, log, nil)
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}
