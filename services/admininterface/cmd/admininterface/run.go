package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"threatview/admininterface/broker"
	"threatview/admininterface/mariadb"
	"threatview/admininterface/postgres"
	"threatview/admininterface/upstream"
	"threatview/admininterface/webui"
	"threatview/platform/config"
	"threatview/platform/httpserver"
	"threatview/platform/logging"
	"threatview/platform/mq"
	"threatview/platform/wire"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultAddr = ":8087"

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	return runWith(ctx, getenv, stdout, nil)
}

// cleanupEnv is the cleanup command's environment, from this process's.
func cleanupEnv(getenv func(string) string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		for _, p := range cleanupEnvPrefixes {
			if strings.HasPrefix(k, p) && getenv(k) != "" {
				env = append(env, k+"="+getenv(k))
			}
		}
	}
	for _, k := range cleanupEnvNames {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	// The page shows the command's info lines, whatever this service logs.
	return append(env, "LOG_LEVEL=info")
}

// runWith is run with a hook that receives the bound address (tests use
// port 0).
func runWith(ctx context.Context, getenv func(string) string, stdout io.Writer, onListen func(net.Addr)) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	log := logging.New(stdout, "admininterface", version, cfg.LogLevel)
	log.Info("starting", "config", config.Masked(cfg))

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second}}
	client := func(u string) *upstream.Client { return upstream.New(u, hc, cfg.UpstreamTimeout) }
	targets, _ := parseTargets(cfg.StatusTargets) // checked by Validate
	opts := webui.Options{EventsQueues: wire.EventsQueues(wire.EventsQueue, cfg.EventsShards)}
	var collector *upstream.Client
	for _, t := range targets {
		c := client(t.url)
		opts.Targets = append(opts.Targets, webui.Target{Name: t.name, Client: c})
		// The local stack names it collector, the chart data-collector.
		if collector == nil && strings.Contains(t.name, "collector") {
			collector = c
		}
	}
	if collector == nil {
		log.Warn("no collector among ADMINUI_STATUS_TARGETS: the status page shows no rates")
	}

	brokerCfg := cfg.Broker
	brokerCfg.Conns = 1
	pub := mq.NewPublisher(brokerCfg, log)
	defer pub.Close()
	brk := broker.New(brokerCfg, pub, log)

	deps := webui.Deps{
		Identity: upstream.Identity{Client: client(cfg.IdentityURL), ForwarderKey: cmp.Or(cfg.IdentityForwarderKey, httpserver.ForwarderKey(cfg.InternalKey))},
		Tokens:   upstream.Tokens{Client: client(cfg.TokensURL)},
		Audit:    upstream.Audit{Client: client(cfg.AuditURL)},
		Broker:   brk,
	}
	if cfg.RendererURL != "" {
		deps.Renderer = upstream.Renderer{Client: client(cfg.RendererURL)}
	}
	if cfg.AlertsURL != "" {
		deps.Alerts = upstream.Alerts{Client: client(cfg.AlertsURL)}
	}
	if cfg.PrivacyURL != "" {
		deps.Privacy = upstream.Privacy{Client: client(cfg.PrivacyURL)}
	}
	if cfg.EventsDatabaseURL != "" {
		pg, err := postgres.Open(ctx, cfg.EventsDatabaseURL)
		if err != nil {
			return err
		}
		defer pg.Close()
		deps.Retention = append(deps.Retention, pg)
	}
	if cfg.AuditDatabaseDSN != "" {
		md, err := mariadb.Open(cfg.AuditDatabaseDSN)
		if err != nil {
			return err
		}
		defer md.Close()
		deps.Retention = append(deps.Retention, md)
	}
	if cfg.CleanupCommand != "" {
		opts.CleanupCommand = strings.Fields(cfg.CleanupCommand)
		opts.CleanupEnv = cleanupEnv(getenv)
	}
	bgCtx, stopBg := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopBg(); wg.Wait() }()
	if collector != nil {
		deps.Sampler = webui.NewSampler(collector, cfg.SampleInterval)
		wg.Add(1)
		go func() { defer wg.Done(); deps.Sampler.Run(bgCtx) }()
	}

	opts.SessionKey = cfg.SessionKey
	opts.SecureCookies = cfg.SecureCookies
	opts.TrustedProxies, _ = httpserver.ParsePrefixes(cfg.TrustedProxies) // checked by Validate
	opts.OIDC = cfg.OIDC
	opts.CollectorURL = cfg.CollectorPublicURL
	opts.InternalKey = cfg.InternalKey
	opts.ExportKey = cfg.ExportKey
	opts.DepthCap = cfg.QueueDepthCap
	if !cfg.SecureCookies {
		log.Warn("cookies are not Secure (ADMINUI_SECURE_COOKIES=false): only for plain HTTP on loopback")
	}
	ui, err := webui.New(opts, deps, log)
	if err != nil {
		return fmt.Errorf("web ui: %w", err)
	}
	reg := httpserver.NewRegistry()
	// Ready when the broker answers; the other services have their own
	// readiness, shown on the status page, and the UI degrades page by page.
	h := ui.Handler(reg, map[string]httpserver.Check{"broker": brk.Ping})
	if err := httpserver.Run(ctx, cfg.HTTP, defaultAddr, h, log, onListen); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	log.Info("stopped")
	return nil
}
