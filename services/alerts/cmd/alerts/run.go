package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"threatview/alerts"
	"threatview/alerts/egress"
	"threatview/alerts/evaluate"
	"threatview/alerts/forward"
	"threatview/alerts/httpapi"
	"threatview/alerts/notify"
	"threatview/alerts/postgres"
	"threatview/platform/auditclient"
	"threatview/platform/authz"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/pipeline"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultAddr = ":8089"

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "alerts", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	store, err := postgres.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return err
	}
	defer store.Close()

	var verifier *authz.Verifier
	if cfg.IdentityURL != "" {
		jwks := authz.NewJWKS(strings.TrimRight(cfg.IdentityURL, "/")+"/.well-known/jwks.json", 5*time.Minute,
			&http.Client{Timeout: 5 * time.Second})
		verifier = authz.NewVerifier(jwks)
	} else {
		log.Warn("access tokens are refused: IDENTITY_SERVICE_URL is blank")
	}
	auth := authz.New(verifier, cfg.AdminKey, log)
	auditor := auditclient.New(cfg.AuditURL, cfg.InternalKey, auditclient.Options{Timeout: cfg.AuditTimeout})

	policy, _ := egress.ParsePolicy(cfg.EgressAllow) // checked by Validate
	guard := egress.NewGuard(policy)
	relay := notify.SMTP{Addr: cfg.SMTPAddr, From: cfg.SMTPFrom, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, TLS: cfg.SMTPTLS}
	if cfg.SMTPCAFile != "" {
		pemText, err := os.ReadFile(cfg.SMTPCAFile)
		if err != nil {
			return fmt.Errorf("ALERTS_SMTP_CA_FILE: %w", err)
		}
		if relay.RootCAs, err = alerts.CertPool(string(pemText)); err != nil {
			return fmt.Errorf("ALERTS_SMTP_CA_FILE %s: %w", cfg.SMTPCAFile, err)
		}
	}

	reg := httpserver.NewRegistry()
	leader := postgres.NewLeader(cfg.DatabaseURL, cfg.LeaderPoll, log)
	loop := evaluate.New(store, notify.New(cfg.NotifyTimeout, relay, guard), evaluate.Config{
		Every: cfg.EvaluateEvery, Attempts: cfg.NotifyAttempts,
		Backoff:    pipeline.Backoff{Initial: cfg.NotifyBackoff, Max: cfg.NotifyBackoffMax},
		OutboxKeep: cfg.OutboxKeep, CountsKeep: cfg.CountsKeep, SendTimeout: cfg.NotifyTimeout,
	}, evaluate.NewMetrics(reg), log)
	host, _ := os.Hostname()
	if host == "" {
		host = "threatview"
	}
	fwd := forward.Config{Batch: cfg.ForwardBatch, Poll: cfg.ForwardPoll, Version: version, Host: host,
		S3:    forward.S3Config{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, PathStyle: cfg.S3PathStyle, Buckets: cfg.S3Buckets},
		Guard: guard, MaxBacklog: cfg.ForwardMaxBacklog, Metrics: forward.NewMetrics(reg)}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := leader.Run(ctx, func(ctx context.Context) error {
			log.Info("leading: evaluating rules and forwarding")
			var inner sync.WaitGroup
			inner.Add(1)
			go func() {
				defer inner.Done()
				_ = forward.Supervise(ctx, store, fwd, log)
			}()
			err := loop.Run(ctx)
			inner.Wait()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		})
		if err != nil && ctx.Err() == nil {
			log.Error("leader loop stopped", "err", err)
		}
	}()

	h := httpapi.New(store, auth, auditor, httpapi.Destinations{Guard: guard, S3Buckets: cfg.S3Buckets}, reg, map[string]httpserver.Check{"database": store.Ping}, log)
	err = httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, nil)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}
