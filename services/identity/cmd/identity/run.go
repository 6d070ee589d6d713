package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"threatview/identity"
	"threatview/identity/httpapi"
	"threatview/identity/mariadb"
	"threatview/identity/oidc"
	"threatview/platform/auditclient"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultAddr = ":8085"

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "identity", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	keys, err := identity.ParseKeyring(cfg.SigningKeys)
	if err != nil {
		return fmt.Errorf("IDENTITY_SIGNING_KEYS: %w", err)
	}
	hasher, err := identity.NewHasher(identity.Argon2Params{MemoryKiB: cfg.Argon2MemoryKiB, Time: cfg.Argon2Time, Threads: cfg.Argon2Threads}, cfg.HashConcurrency)
	if err != nil {
		return err
	}
	db, err := mariadb.Open(cfg.DatabaseDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	store := mariadb.New(db)

	var auditor identity.Auditor
	if cfg.AuditURL != "" {
		auditor = auditclient.New(cfg.AuditURL, cfg.InternalKey, auditclient.Options{
			Timeout: cfg.AuditTimeout, Unavailable: identity.ErrAuditUnavailable,
			HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}},
		})
	} else {
		log.Warn("auditing is off: AUDITLOGGER_SERVICE_URL is blank")
	}
	svc := identity.NewService(store, hasher, keys, auditor, identity.Options{
		AccessTTL: cfg.AccessTTL, RefreshTTL: cfg.RefreshTTL, RefreshGrace: cfg.RefreshGrace, OIDCSessionTTL: cfg.OIDCSessionTTL,
		MaxFailuresUser: cfg.MaxFailuresUser, MaxFailuresIP: cfg.MaxFailuresIP, FailureWindow: cfg.FailureWindow,
	}, log)

	if cfg.BootstrapUser != "" {
		created, err := bootstrap(ctx, svc, cfg.BootstrapUser, cfg.BootstrapPassword)
		if err != nil {
			return fmt.Errorf("create the first admin (IDENTITY_BOOTSTRAP_ADMIN_USER): %w", err)
		}
		log.Info("first admin", "username", cfg.BootstrapUser, "created", created)
	}

	if cfg.RescueOwner != "" {
		if err := retryAudit(ctx, func(ctx context.Context) error { return svc.Rescue(ctx, cfg.RescueOwner, cfg.RescuePassword) }); err != nil {
			return fmt.Errorf("rescue the owner (IDENTITY_RESCUE_OWNER): %w", err)
		}
		log.Warn("owner rescued: remove IDENTITY_RESCUE_OWNER and IDENTITY_RESCUE_PASSWORD now", "username", cfg.RescueOwner)
	}

	opts := httpapi.Options{AdminKey: cfg.AdminKey, TrustedProxies: cfg.TrustedPrefixes(), ForwarderKey: cmp.Or(cfg.ForwarderKey, httpserver.ForwarderKey(cfg.InternalKey)), SecureCookies: cfg.SecureCookies}
	if cfg.OIDCIssuer != "" {
		roleMap, _ := identity.ParseRoleMap(cfg.OIDCRoleMap) // checked by Validate
		opts.OIDC = oidc.New(oidc.Config{
			Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret,
			RedirectURL: cfg.OIDCRedirectURL, Scopes: cfg.OIDCScopes,
			GroupsClaim: cfg.OIDCGroupsClaim, UsernameClaim: cfg.OIDCUsernameClaim, RoleMap: roleMap,
		}, store, nil, log)
	}
	reg := httpserver.NewRegistry()
	h := httpapi.New(svc, opts, reg, map[string]httpserver.Check{"database": store.Ping}, log)
	if err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, nil); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}

// bootstrap creates the first admin, waiting for the audit logger like
// retryAudit.
func bootstrap(ctx context.Context, svc *identity.Service, user, password string) (bool, error) {
	var created bool
	err := retryAudit(ctx, func(ctx context.Context) (err error) {
		created, err = svc.Bootstrap(ctx, user, password)
		return err
	})
	return created, err
}

// retryAudit runs f until it no longer fails for want of the audit logger
// (starting next to this service), for up to 20 s.
func retryAudit(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		err := f(ctx)
		if !errors.Is(err, identity.ErrAuditUnavailable) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}
