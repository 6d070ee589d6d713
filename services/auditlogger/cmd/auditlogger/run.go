package main

import (
	"context"
	"fmt"
	"io"

	"threatview/auditlogger/broker"
	"threatview/auditlogger/httpapi"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/auditlogger/trail/s3store"
	"threatview/platform/authz"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/mq"
)

var version = "dev"

const defaultAddr = ":8081"

// run starts audit-logger and serves until ctx ends (tests use
// HTTP_ADDR=127.0.0.1:0 and find the address in the log).
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "auditlogger", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	db, err := mariadb.Open(cfg.DatabaseDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	store := mariadb.New(db)

	reg := httpserver.NewRegistry()
	mqp := mq.NewPublisher(cfg.Broker, log)
	defer mqp.Close()
	pub := broker.NewGroupPublisher(mqp, cfg.Queue, broker.Options{
		Window:          cfg.CoalesceWindow,
		MaxMessageBytes: cfg.MaxMessageBytes,
		Concurrency:     max(1, cfg.Broker.Conns),
		SendTimeout:     cfg.Broker.DialTimeout + cfg.Broker.ReceiptTimeout,
	}, reg, log)
	defer pub.Close()

	var people *authz.Verifier
	if cfg.IdentityJWKSURL != "" {
		people = authz.NewVerifier(authz.NewJWKS(cfg.IdentityJWKSURL, 0, nil))
	}
	var tr *httpapi.Trail
	if cfg.PublicKeys != "" {
		keys, err := trail.ParsePublicKeys(cfg.PublicKeys)
		if err != nil {
			return err
		}
		tr = &httpapi.Trail{DB: mariadb.NewTrail(db), Keys: keys, Metrics: httpapi.NewTrailMetrics(reg)}
		st, err := s3store.Open(ctx, cfg.TrailDir, cfg.TrailS3, nil)
		if err != nil {
			return err
		}
		if st != nil {
			tr.Ref = trail.StoreReference{Store: st}
		} else {
			log.Warn("no object store for the audit trail (AUDIT_TRAIL_DIR, AUDIT_TRAIL_S3_BUCKET): every verification reports it unanchored")
		}
	}
	api := httpapi.New(pub, store, httpapi.Options{
		Trail:           tr,
		InternalKey:     cfg.InternalKey,
		AdminKey:        cfg.AdminKey,
		People:          people,
		StoreBody:       cfg.StoreBody,
		MaxRequestBytes: cfg.MaxRequestBytes,
		MaxRecords:      cfg.MaxRecords,
	}, log)
	// Ready means POST works: the broker only. The database serves GET,
	// which answers 503 on its own while MariaDB is away.
	h := api.Handler(reg, map[string]httpserver.Check{"broker": mqp.Ping})
	if err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, nil); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}
