// Command trailgen builds a large chained audit trail in a database of its
// own, for measuring verification (docs/audit-trail.md, "Cost"): it creates
// and migrates the database, stores -rows realistic records through the
// worker's own insert path (sequence numbers, leaves, tree), signs one
// checkpoint with a key derived from -seed and writes it and the leaf
// bundles to -dir, then prints the variables auditverify needs. -drop
// removes the database instead. The server is AUDIT_DATABASE_DSN's; the
// shared audit database is never touched.
//
//	go run ./internal/trailgen -db audit_verify10m -rows 10000000 -dir /tmp/trail10m
//	go run ./internal/trailgen -db audit_verify10m -drop
package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/go-sql-driver/mysql"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/migrations"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "trailgen:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("db", "audit_verifybench", "database to create (or drop)")
	rows := flag.Int("rows", 1000000, "rows to store")
	batch := flag.Int("batch", 2000, "rows a transaction")
	dir := flag.String("dir", "", "directory receiving the checkpoint and leaf bundles")
	seed := flag.String("seed", "trailgen", "text the signing key is derived from (a measurement key, not a secret)")
	drop := flag.Bool("drop", false, "drop the database and exit")
	flag.Parse()
	if !regexp.MustCompile(`^audit_[a-z0-9_]+$`).MatchString(*name) {
		return fmt.Errorf("-db %q: want audit_ and lower-case letters, digits or _", *name)
	}
	cfg, err := mysql.ParseDSN(os.Getenv("AUDIT_DATABASE_DSN"))
	if err != nil || cfg.Addr == "" {
		return fmt.Errorf("AUDIT_DATABASE_DSN: %v", err)
	}
	cfg.ParseTime = true
	admin := cfg.Clone()
	admin.DBName = ""
	adb, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		return err
	}
	defer adb.Close()
	ctx := context.Background()
	if *drop {
		// sql: DDL; the name is checked against ^audit_[a-z0-9_]+$.
		_, err := adb.ExecContext(ctx, "DROP DATABASE IF EXISTS "+*name)
		return err
	}
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	// sql: DDL; the name is checked against ^audit_[a-z0-9_]+$.
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+*name+" CHARACTER SET utf8mb4"); err != nil {
		return err
	}
	cfg.DBName = *name
	db, err := mariadb.Open(cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db, migrations.Audit); err != nil {
		return err
	}
	s := mariadb.New(db)
	if _, err := s.LoadMaxPacket(ctx); err != nil {
		return err
	}
	start := time.Now()
	t0 := start.Add(-time.Duration(*rows/(*batch)+1) * time.Second)
	for i := 0; i < *rows; i += *batch {
		n := min(*batch, *rows-i)
		if _, err := s.Insert(ctx, audittest.Records(n, t0.Add(time.Duration(i / *batch)*time.Second))); err != nil {
			return err
		}
		if (i / *batch)%500 == 0 {
			fmt.Fprintf(os.Stderr, "%d rows (%.0f rows/s)\n", i+n, float64(i+n)/time.Since(start).Seconds())
		}
	}
	key := sha256.Sum256([]byte(*seed))
	signer, _, err := trail.ParseSigningKeys(base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		return err
	}
	cp, err := (&trail.Checkpointer{DB: mariadb.NewTrail(db), Store: trail.Dir{Root: *dir}, Signer: signer}).Once(ctx, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "stored %d rows in %s, checkpoint of size %d\n", *rows, time.Since(start).Round(time.Second), cp.Size)
	fmt.Printf("AUDIT_DATABASE_DSN='%s'\nAUDIT_PUBLIC_KEYS='%s'\nAUDIT_TRAIL_DIR='%s'\n", cfg.FormatDSN(),
		base64.StdEncoding.EncodeToString(signer.Public()), *dir)
	return nil
}
