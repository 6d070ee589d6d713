package main

import (
	"errors"
	"threatview/auditlogger/trail/s3store"
	"time"

	"threatview/platform/httpserver"
	"threatview/platform/mq"
)

// Config is the configuration of audit-logger, read from the
// environment.
type Config struct {
	HTTP   httpserver.Config
	Broker mq.Config
	// DatabaseDSN is the audit database the query API reads (go-sql-driver DSN).
	DatabaseDSN string `env:"AUDIT_DATABASE_DSN" secret:"true"`
	AdminKey    string `env:"ADMIN_KEY" secret:"true"`
	// IdentityJWKSURL is the identity service's JWK set; with it, people's
	// access tokens with role auditor or admin may read the trail (GET).
	// Blank: the admin key only.
	IdentityJWKSURL string `env:"IDENTITY_JWKS_URL"`
	InternalKey     string `env:"INTERNAL_KEY" secret:"true"`
	Queue           string `env:"AUDITLOGGER_QUEUE" envDefault:"/queue/threatview.audit"`
	// CoalesceWindow is how long the first post of a broker message waits
	// for others to join it. Posts arriving while earlier messages are in
	// flight join the next message anyway, so the default 0 batches by load
	// alone: the collector has already coalesced its records, and a fixed
	// wait here would add to the audit path, the slower of a request's two.
	CoalesceWindow time.Duration `env:"AUDITLOGGER_COALESCE_WINDOW" envDefault:"0s"`
	// MaxMessageBytes caps one broker message; a single post larger than
	// this still goes as its own message.
	MaxMessageBytes int `env:"AUDITLOGGER_MAX_MESSAGE_BYTES" envDefault:"1048576"`
	// MaxRequestBytes caps a POST body (413 above).
	MaxRequestBytes int64 `env:"AUDITLOGGER_MAX_REQUEST_BYTES" envDefault:"4194304"`
	// MaxRecords caps the records of one POST (413 above).
	MaxRecords int `env:"AUDITLOGGER_MAX_RECORDS" envDefault:"1000"`
	// StoreBody keeps request bodies in the trail; off by default (storage).
	StoreBody bool   `env:"AUDITLOGGER_STORE_BODY" envDefault:"false"`
	LogLevel  string `env:"LOG_LEVEL" envDefault:"info"`
	// PublicKeys are the Ed25519 public keys (base64, comma-separated) that
	// sign the trail's checkpoints, published at GET /v1/audit/keys; blank
	// serves no tamper-evidence endpoints.
	PublicKeys string `env:"AUDIT_PUBLIC_KEYS"`
	// TrailDir is the directory the worker writes checkpoints and leaf
	// bundles to (outside the database); blank verifies against the
	// database's checkpoints alone.
	TrailDir string `env:"AUDIT_TRAIL_DIR"`
	// TrailS3 is the bucket the worker writes them to (AUDIT_TRAIL_S3_*,
	// ARCHIVE_S3_*); with both set, verification reads the bucket.
	TrailS3 s3store.Env
}

// Validate checks the relations between fields; the error names the variable.
func (c *Config) Validate() error {
	switch {
	case c.DatabaseDSN == "":
		return errors.New("AUDIT_DATABASE_DSN is required (GET /v1/audit reads it)")
	case c.InternalKey == "":
		return errors.New("INTERNAL_KEY is required (callers of POST /v1/audit present it)")
	case c.AdminKey == "":
		return errors.New("ADMIN_KEY is required (callers of GET /v1/audit present it)")
	case c.AdminKey == c.InternalKey:
		// Every service that posts records holds the internal key; it must
		// not also read (or, through GET, enumerate) the whole trail.
		return errors.New("ADMIN_KEY and INTERNAL_KEY must differ: the internal key must not grant admin calls")
	case c.Queue == "":
		return errors.New("AUDITLOGGER_QUEUE must not be empty")
	case c.CoalesceWindow < 0 || c.CoalesceWindow > time.Second:
		return errors.New("AUDITLOGGER_COALESCE_WINDOW must be between 0 and 1s")
	case c.MaxMessageBytes < 1024:
		return errors.New("AUDITLOGGER_MAX_MESSAGE_BYTES must be at least 1024")
	case c.MaxRequestBytes < 1024:
		return errors.New("AUDITLOGGER_MAX_REQUEST_BYTES must be at least 1024")
	case c.MaxRecords < 1:
		return errors.New("AUDITLOGGER_MAX_RECORDS must be at least 1")
	}
	return nil
}
