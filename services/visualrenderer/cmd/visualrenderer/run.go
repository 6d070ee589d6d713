package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"threatview/platform/authz"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/visualrenderer/httpapi"
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

	var verifier *authz.Verifier
	if cfg.IdentityURL != "" {
		jwks := authz.NewJWKS(strings.TrimRight(cfg.IdentityURL, "/")+"/.well-known/jwks.json", 5*time.Minute,
			&http.Client{Timeout: 5 * time.Second})
		verifier = authz.NewVerifier(jwks)
	} else {
		log.Warn("access tokens are refused: IDENTITY_SERVICE_URL is blank")
	}
	auth := httpapi.NewAuth(authz.New(verifier, cfg.AdminKey, log), cfg.AdminKey, cfg.SessionTTL, cfg.SecureCookies)

	reg := httpserver.NewRegistry()
	h := httpapi.New(store, auth, reg, map[string]httpserver.Check{"database": store.Ping}, log)
	if err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, nil); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}
