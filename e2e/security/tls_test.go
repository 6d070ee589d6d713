package security

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"threatview/e2e/internal/e2etest"
)

// TLS to the databases is configured through the connection strings the
// services read (EVENTS_DATABASE_URL's sslmode, the DSNs' tls parameter).
// These tests open connections the way the services do (the processor:
// pgxpool.ParseConfig and NewWithConfig; tokens and the audit logger:
// mysql.ParseDSN, NewConnector and sql.OpenDB) — with the drivers directly,
// since this module imports no service. The local servers speak no TLS, so
// a connection that asks for TLS must fail with a TLS error, while the same
// string without it connects: the setting reaches the driver.

func isTLSError(err error) bool {
	s := strings.ToLower(err.Error())
	for _, w := range []string{"tls", "ssl", "x509", "certificate"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func pgPing(rawURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return err
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	return pool.Ping(ctx)
}

func TestTLS_PostgresSSLMode(t *testing.T) {
	env := e2etest.MustEnv(t)
	u, err := url.Parse(env.EventsURL)
	if err != nil {
		t.Fatal(err)
	}
	with := func(mode string) string {
		v := u.Query()
		v.Set("sslmode", mode)
		c := *u
		c.RawQuery = v.Encode()
		return c.String()
	}
	if err := pgPing(with("disable")); err != nil {
		t.Fatalf("sslmode=disable: %v (the plain connection must work)", err)
	}
	for _, mode := range []string{"require", "verify-full"} {
		err := pgPing(with(mode))
		if err == nil {
			t.Errorf("sslmode=%s connected to a server without TLS: the setting did not reach the driver", mode)
			continue
		}
		if !isTLSError(err) {
			t.Errorf("sslmode=%s failed with %v, want a TLS error", mode, err)
		}
		t.Logf("sslmode=%s: %v", mode, err)
	}
}

func mariaPing(dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.ParseTime = true
	cfg.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func TestTLS_MariaDBTLSParameter(t *testing.T) {
	env := e2etest.MustEnv(t)
	for name, dsn := range map[string]string{"TOKENS_DATABASE_DSN": env.TokensDSN, "AUDIT_DATABASE_DSN": env.AuditDSN} {
		t.Run(name, func(t *testing.T) {
			if err := mariaPing(dsn); err != nil {
				t.Fatalf("plain DSN: %v", err)
			}
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			for _, v := range []string{"true", "skip-verify"} {
				err := mariaPing(dsn + sep + "tls=" + v)
				if err == nil {
					t.Errorf("tls=%s connected to a server without TLS: the setting did not reach the driver", v)
					continue
				}
				if !isTLSError(err) {
					t.Errorf("tls=%s failed with %v, want a TLS error", v, err)
				}
				t.Logf("tls=%s: %v", v, err)
			}
		})
	}
}
