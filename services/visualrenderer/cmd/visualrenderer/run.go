package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"threatview/platform/auditclient"
	"threatview/platform/authz"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/wire"
	"threatview/visualrenderer/httpapi"
	"threatview/visualrenderer/identity"
	"threatview/visualrenderer/postgres"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultAddr = ":8086"

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "visualrenderer", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	store, err := postgres.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return err
	}
	defer store.Close()

	var auth *httpapi.Auth
	if cfg.IdentityURL != "" {
		trusted, _ := httpserver.ParsePrefixes(cfg.TrustedProxies) // checked by Validate
		auth = httpapi.NewIdentityAuth(cfg.IdentityURL, identity.ForwarderKey(cfg.IdentityForwarderKey, cfg.InternalKey), cfg.AdminKey, cfg.SecureCookies, log).TrustProxies(trusted)
	} else {
		log.Warn("people cannot sign in: IDENTITY_SERVICE_URL is blank; only the admin key is accepted")
		auth = httpapi.NewAuth(authz.New(nil, cfg.AdminKey, log), nil, nil, cfg.SecureCookies, log)
	}

	reg := httpserver.NewRegistry()
	inv := httpapi.Investigation{Store: store}
	inv.Users, _ = wire.ParsePseudonymKeys(cfg.UserIDKeys) // checked by Validate
	if cfg.AuditURL != "" {
		inv.Audit = auditclient.New(cfg.AuditURL, cfg.InternalKey, auditclient.Options{Timeout: 5 * time.Second})
	} else {
		log.Warn("AUDITLOGGER_SERVICE_URL is blank: event searches and taxonomy changes are not audited")
	}
	h := httpapi.New(store, auth, reg, map[string]httpserver.Check{"database": store.Ping}, log, inv, httpapi.AdminURL(cfg.AdminURL))
	if err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, nil); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}
