package main

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"threatview/platform/httpserver"
	"threatview/platform/wire"
	"threatview/retention"
)

// Config is the privacy service's configuration, read from the environment.
type Config struct {
	EventsDatabaseURL string `env:"EVENTS_DATABASE_URL,required" secret:"true"`
	// AuditDatabaseDSN is where audit bodies are redacted; blank leaves
	// them alone (and says so in every report's verification).
	AuditDatabaseDSN string `env:"AUDIT_DATABASE_DSN" secret:"true"`
	AdminKey         string `env:"ADMIN_KEY,required" secret:"true"`
	InternalKey      string `env:"INTERNAL_KEY" secret:"true"`
	// AuditURL is the audit logger every request is audited through
	// (required in a deployment; blank only for tests).
	AuditURL string `env:"AUDITLOGGER_SERVICE_URL"`
	// IdentityJWKSURL verifies people's access tokens; blank accepts only
	// the admin key.
	IdentityJWKSURL string `env:"IDENTITY_JWKS_URL"`

	// UserIDKeys are the collector's user id keys (COLLECTOR_USER_ID_KEYS,
	// "k2:<hex>,k1:<hex>"): an erasure by user id finds the events stored
	// under each. Blank: erasures by user id are refused (422).
	UserIDKeys string `env:"PRIVACY_USER_ID_KEYS" secret:"true"`

	// BatchRows is the most events one erasure transaction deletes.
	BatchRows int `env:"PRIVACY_BATCH_ROWS" envDefault:"5000"`
	// Settle is how long an erasure waits after suppressing the subject
	// before deleting: at least twice PROCESSOR_SUPPRESSION_REFRESH (2s).
	Settle time.Duration `env:"PRIVACY_SETTLE" envDefault:"5s"`
	// Poll is how often the runner looks for queued erasures, and the
	// first backoff of an erasure whose try failed for a transient reason.
	Poll time.Duration `env:"PRIVACY_POLL" envDefault:"2s"`
	// MaxBackoff bounds the wait between two tries of one erasure.
	MaxBackoff time.Duration `env:"PRIVACY_MAX_BACKOFF" envDefault:"5m"`
	// MaxAttempts is how many tries an erasure gets before it fails.
	MaxAttempts int `env:"PRIVACY_MAX_ATTEMPTS" envDefault:"20"`

	// Archive is where the archiver writes (ARCHIVE_TARGET, as for the
	// archiver): an erasure rewrites the archived months that hold the
	// subject. Blank: archives are not rewritten (a warning at start; the
	// report lists the archived months).
	ArchiveTarget      string `env:"ARCHIVE_TARGET"`
	ArchiveDir         string `env:"ARCHIVE_DIR"`
	ArchiveS3Endpoint  string `env:"ARCHIVE_S3_ENDPOINT"`
	ArchiveS3Region    string `env:"ARCHIVE_S3_REGION" envDefault:"us-east-1"`
	ArchiveS3Bucket    string `env:"ARCHIVE_S3_BUCKET"`
	ArchiveS3Prefix    string `env:"ARCHIVE_S3_PREFIX"`
	ArchiveS3PathStyle bool   `env:"ARCHIVE_S3_FORCE_PATH_STYLE" envDefault:"false"`
	// ArchiveChunkRows is the rows per file of a rewritten archive.
	ArchiveChunkRows int `env:"ARCHIVE_CHUNK_ROWS" envDefault:"100000"`

	HTTP     httpserver.Config
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`
}

const defaultAddr = ":8088"

// Validate checks the values parsing cannot.
func (c *Config) Validate() error {
	switch {
	case c.BatchRows < 1 || c.BatchRows > 100000:
		return fmt.Errorf("PRIVACY_BATCH_ROWS must be 1..100000, got %d", c.BatchRows)
	case c.Settle < 0:
		return errors.New("PRIVACY_SETTLE must not be negative")
	case c.Poll <= 0:
		return errors.New("PRIVACY_POLL must be positive")
	case c.MaxBackoff < c.Poll:
		return errors.New("PRIVACY_MAX_BACKOFF must be at least PRIVACY_POLL")
	case c.MaxAttempts < 1:
		return fmt.Errorf("PRIVACY_MAX_ATTEMPTS must be at least 1, got %d", c.MaxAttempts)
	case c.ArchiveChunkRows < 1:
		return fmt.Errorf("ARCHIVE_CHUNK_ROWS must be at least 1, got %d", c.ArchiveChunkRows)
	case c.AuditURL != "" && c.InternalKey == "":
		return errors.New("AUDITLOGGER_SERVICE_URL needs INTERNAL_KEY")
	}
	if _, err := wire.ParsePseudonymKeys(c.UserIDKeys); err != nil {
		return fmt.Errorf("PRIVACY_USER_ID_KEYS: %w", err)
	}
	for name, v := range map[string]string{"AUDITLOGGER_SERVICE_URL": c.AuditURL, "IDENTITY_JWKS_URL": c.IdentityJWKSURL} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q is not an http(s) URL", name, v)
		}
	}
	t := c.Archive()
	return t.Resolve()
}

// Archive is the archive target in the archiver's terms (the same
// variables; listed here one by one, as the chart's checks read them).
func (c *Config) Archive() retention.TargetConfig {
	return retention.TargetConfig{Target: c.ArchiveTarget, Dir: c.ArchiveDir, S3Endpoint: c.ArchiveS3Endpoint,
		S3Region: c.ArchiveS3Region, S3Bucket: c.ArchiveS3Bucket, S3Prefix: c.ArchiveS3Prefix, S3PathStyle: c.ArchiveS3PathStyle}
}
