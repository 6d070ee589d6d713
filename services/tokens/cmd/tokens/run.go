package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"threatview/platform/auditclient"
	"threatview/platform/authz"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/mq"
	"threatview/tokens"
	"threatview/tokens/broker"
	"threatview/tokens/httpapi"
	"threatview/tokens/mariadb"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultAddr = ":8083"

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "tokens", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	db, err := mariadb.Open(cfg.DatabaseDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	store := mariadb.New(db)

	var auditor tokens.Auditor
	if cfg.AuditURL != "" {
		auditor = auditclient.New(cfg.AuditURL, cfg.InternalKey, auditclient.Options{
			Timeout:     cfg.AuditTimeout,
			Unavailable: tokens.ErrAuditUnavailable,
			HTTP:        &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}},
		})
	} else {
		log.Warn("auditing is off: AUDITLOGGER_SERVICE_URL is blank")
	}
	checks := map[string]httpserver.Check{"database": store.Ping}
	var announcer tokens.Announcer
	if cfg.RevocationsTopic != "" {
		pub := mq.NewPublisher(cfg.Broker, log)
		defer pub.Close()
		// Not a readiness check: only a revocation needs the broker, and it
		// answers 503 by itself while the broker is away; taking the
		// service out of rotation would fail introspection as well.
		announcer = broker.New(pub, cfg.RevocationsTopic)
	} else {
		log.Warn("revocations are not announced: TOKENS_REVOCATIONS_TOPIC is blank")
	}
	svc := tokens.NewService(store, auditor, announcer, cfg.LastUsedInterval, log)

	// The last-used writer outlives the HTTP server so it can flush the
	// uses of the final requests.
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); svc.RunLastUsed(bgCtx) }()
	defer func() { stopBg(); wg.Wait() }()

	reg := httpserver.NewRegistry()
	var people *authz.Verifier
	if cfg.IdentityJWKSURL != "" {
		people = authz.NewVerifier(authz.NewJWKS(cfg.IdentityJWKSURL, 0, nil))
	} else {
		log.Warn("people's access tokens are refused: IDENTITY_JWKS_URL is blank")
	}
	h := httpapi.New(svc, httpapi.Keys{Admin: cfg.AdminKey, Internal: cfg.InternalKey, People: people}, reg,
		checks, log)
	if err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, nil); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}
