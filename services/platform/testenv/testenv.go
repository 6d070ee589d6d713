// Package testenv gives integration tests the real backing services of the
// local stack (`make up`): a fresh Postgres or MariaDB database per test,
// dropped in t.Cleanup, and the broker's address with unique queue names.
//
// Addresses come from the variables in .run/env. When one is unset the test
// is skipped, unless THREATVIEW_REQUIRE_SERVICES=1 (set by `make test`), in
// which case it fails: under `make test` a missing service is a failure.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"threatview/platform/mq"
)

// Required reports whether integration services are mandatory (make test).
func Required() bool { return os.Getenv("THREATVIEW_REQUIRE_SERVICES") == "1" }

// MustEnv returns the value of an environment variable of the local stack,
// skipping (or failing under make test) when it is unset.
func MustEnv(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		if Required() {
			tb.Fatalf("%s is not set: start the stack with `make up` and source .run/env", name)
		}
		tb.Skipf("%s is not set; run `make up` and source .run/env to run this integration test", name)
	}
	return v
}

// Name returns a short random lowercase name with the given prefix, usable as
// a database or queue name.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// MustPostgres creates a fresh database on the events Postgres server and
// returns its URL. The database is dropped when the test ends.
func MustPostgres(tb testing.TB) string {
	tb.Helper()
	return MustPostgresWith(tb, "")
}

// MustPostgresWith is MustPostgres with options for CREATE DATABASE (a
// constant of the test, e.g. "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'
// LOCALE 'C' TEMPLATE template0").
func MustPostgresWith(tb testing.TB, options string) string {
	tb.Helper()
	base := MustEnv(tb, "EVENTS_DATABASE_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connect to Postgres (%s): %v", redactURL(base), err)
	}
	defer conn.Close(context.Background())
	name := Name("t")
	// sql: DDL; name comes from Name (a prefix and random hex), options
	// is a constant of the calling test.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" "+options); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		// An autovacuum worker can hold the database for a moment, and the
		// test role may not terminate it: retry for a while.
		for {
			// sql: DDL; name comes from Name (a prefix and random hex).
			_, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
				tb.Errorf("drop database %s: %v", name, err)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return replaceURLPath(base, name)
}

// MustMariaDB creates a fresh database on the MariaDB server (the one in
// AUDIT_DATABASE_DSN) and returns a go-sql-driver DSN for it. The database is
// dropped when the test ends.
func MustMariaDB(tb testing.TB) string {
	tb.Helper()
	base := MustEnv(tb, "AUDIT_DATABASE_DSN")
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		tb.Fatalf("parse AUDIT_DATABASE_DSN: %v", err)
	}
	cfg.ParseTime = true
	admin := cfg.Clone()
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		tb.Fatalf("open MariaDB: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := Name("t")
	// sql: DDL; name comes from Name (a prefix and random hex).
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		tb.Fatalf("create database %s on MariaDB (%s): %v", name, cfg.Addr, err)
	}
	tb.Cleanup(func() {
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer db.Close()
		// sql: DDL; name comes from Name (a prefix and random hex).
		if _, err := db.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// MustBroker returns a broker configuration for the local ActiveMQ after
// checking that its STOMP port accepts connections.
func MustBroker(tb testing.TB) mq.Config {
	tb.Helper()
	addr := MustEnv(tb, "STOMP_ADDR")
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		tb.Fatalf("broker at %s is not reachable: %v", addr, err)
	}
	c.Close()
	return mq.Config{
		Addr:           addr,
		Login:          os.Getenv("STOMP_LOGIN"),
		Passcode:       os.Getenv("STOMP_PASSCODE"),
		Host:           "/",
		Conns:          2,
		DialTimeout:    3 * time.Second,
		ReceiptTimeout: 5 * time.Second,
		HeartBeat:      2 * time.Second,
		CloseTimeout:   2 * time.Second,
	}
}

// Queue returns a queue destination unique to this test run, so tests never
// see each other's messages.
func Queue(base string) string {
	return "/queue/" + Name("test."+base)
}

// Root returns the repository root (the directory holding go.work).
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("getwd: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("no go.work above the test's directory")
		}
		dir = parent
	}
}

// Stack runs scripts/stack.sh with args (for example "restart", "activemq")
// and fails the test when it fails. Fault tests use it to stop, kill and
// restart parts of the local stack.
func Stack(tb testing.TB, args ...string) string {
	tb.Helper()
	root := Root(tb)
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "scripts", "stack.sh")}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("scripts/stack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func replaceURLPath(u, newDB string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + newDB
	return parsed.String()
}

func redactURL(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// MustPing fails the test unless f succeeds within d, retrying; it is for
// waiting on something the test itself started.
func MustPing(tb testing.TB, d time.Duration, what string, f func() error) {
	tb.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("%s not ready after %s: %v", what, d, err)
}
