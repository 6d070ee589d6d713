package retention

import (
	"fmt"
	"net/url"
	"strings"
)

// TargetConfig says where archives live. ARCHIVE_TARGET is either a URL
// (dir:///var/archive, s3://bucket/prefix) or just the kind ("dir", "s3")
// with the location in ARCHIVE_DIR or ARCHIVE_S3_BUCKET/ARCHIVE_S3_PREFIX.
// Blank means archiving is off. S3 credentials come from the AWS SDK's
// default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, web identity, ...).
type TargetConfig struct {
	Target      string `env:"ARCHIVE_TARGET"`
	Dir         string `env:"ARCHIVE_DIR"`
	S3Endpoint  string `env:"ARCHIVE_S3_ENDPOINT"`
	S3Region    string `env:"ARCHIVE_S3_REGION" envDefault:"us-east-1"`
	S3Bucket    string `env:"ARCHIVE_S3_BUCKET"`
	S3Prefix    string `env:"ARCHIVE_S3_PREFIX"`
	S3PathStyle bool   `env:"ARCHIVE_S3_FORCE_PATH_STYLE" envDefault:"false"`
}

// Kind returns "dir", "s3" or "" (archiving off).
func (c TargetConfig) Kind() string {
	k, _, _ := strings.Cut(c.Target, ":")
	return strings.ToLower(k)
}

// Resolve folds a URL-form ARCHIVE_TARGET into Dir or S3Bucket/S3Prefix and
// checks that the chosen target has a location.
func (c *TargetConfig) Resolve() error {
	t := strings.TrimSpace(c.Target)
	switch {
	case t == "":
		return nil
	case strings.EqualFold(t, "dir"):
		if c.Dir == "" {
			return fmt.Errorf("ARCHIVE_TARGET=dir needs ARCHIVE_DIR")
		}
	case strings.EqualFold(t, "s3"):
		if c.S3Bucket == "" {
			return fmt.Errorf("ARCHIVE_TARGET=s3 needs ARCHIVE_S3_BUCKET")
		}
	case strings.HasPrefix(strings.ToLower(t), "dir://"):
		u, err := url.Parse(t)
		if err != nil || u.Path == "" || u.Host != "" {
			return fmt.Errorf("ARCHIVE_TARGET %q: want dir:///absolute/path", t)
		}
		if c.Dir != "" && c.Dir != u.Path {
			return fmt.Errorf("ARCHIVE_TARGET %q and ARCHIVE_DIR %q disagree", t, c.Dir)
		}
		c.Dir = u.Path
	case strings.HasPrefix(strings.ToLower(t), "s3://"):
		u, err := url.Parse(t)
		if err != nil || u.Host == "" {
			return fmt.Errorf("ARCHIVE_TARGET %q: want s3://bucket/prefix", t)
		}
		prefix := strings.Trim(u.Path, "/")
		if c.S3Bucket != "" && c.S3Bucket != u.Host {
			return fmt.Errorf("ARCHIVE_TARGET %q and ARCHIVE_S3_BUCKET %q disagree", t, c.S3Bucket)
		}
		if c.S3Prefix != "" && strings.Trim(c.S3Prefix, "/") != prefix {
			return fmt.Errorf("ARCHIVE_TARGET %q and ARCHIVE_S3_PREFIX %q disagree", t, c.S3Prefix)
		}
		c.S3Bucket, c.S3Prefix = u.Host, prefix
	default:
		return fmt.Errorf("ARCHIVE_TARGET %q: want dir:///path, s3://bucket/prefix, dir or s3", t)
	}
	return nil
}

// CleanupConfig configures cmd/cleanup. A blank database URL skips that
// database. CLEANUP_REQUIRE_ARCHIVE is "true", "false" or blank; blank means
// required exactly when archiving is on (ARCHIVE_TARGET set).
type CleanupConfig struct {
	EventsDatabaseURL     string `env:"EVENTS_DATABASE_URL" secret:"true"`
	AuditDatabaseDSN      string `env:"AUDIT_DATABASE_DSN" secret:"true"`
	Enabled               bool   `env:"CLEANUP_ENABLED" envDefault:"false"`
	EventsRetentionMonths int    `env:"CLEANUP_EVENTS_RETENTION_MONTHS" envDefault:"3"`
	AuditRetentionMonths  int    `env:"CLEANUP_AUDIT_RETENTION_MONTHS" envDefault:"12"`
	RequireArchive        string `env:"CLEANUP_REQUIRE_ARCHIVE"`
	Archive               TargetConfig
	LogLevel              string `env:"LOG_LEVEL" envDefault:"info"`
}

// ArchiveRequired reports whether cleanup must find a verified archive
// before dropping a partition.
func (c CleanupConfig) ArchiveRequired() bool {
	switch strings.ToLower(c.RequireArchive) {
	case "true", "1", "yes":
		return true
	case "false", "0", "no":
		return false
	}
	return c.Archive.Kind() != ""
}

// Validate checks relations between fields; it names the variable at fault.
func (c *CleanupConfig) Validate() error {
	switch strings.ToLower(c.RequireArchive) {
	case "", "true", "1", "yes", "false", "0", "no":
	default:
		return fmt.Errorf("CLEANUP_REQUIRE_ARCHIVE %q: want true, false or blank", c.RequireArchive)
	}
	if c.EventsRetentionMonths < 1 {
		return fmt.Errorf("CLEANUP_EVENTS_RETENTION_MONTHS must be at least 1, got %d", c.EventsRetentionMonths)
	}
	if c.AuditRetentionMonths < 1 {
		return fmt.Errorf("CLEANUP_AUDIT_RETENTION_MONTHS must be at least 1, got %d", c.AuditRetentionMonths)
	}
	if c.EventsDatabaseURL == "" && c.AuditDatabaseDSN == "" {
		return fmt.Errorf("set EVENTS_DATABASE_URL, AUDIT_DATABASE_DSN or both")
	}
	return c.Archive.Resolve()
}

// ArchiverConfig configures cmd/archiver. A blank database URL skips that
// database; ARCHIVE_TARGET is required.
type ArchiverConfig struct {
	EventsDatabaseURL string `env:"EVENTS_DATABASE_URL" secret:"true"`
	AuditDatabaseDSN  string `env:"AUDIT_DATABASE_DSN" secret:"true"`
	Archive           TargetConfig
	ChunkRows         int    `env:"ARCHIVE_CHUNK_ROWS" envDefault:"100000"`
	LogLevel          string `env:"LOG_LEVEL" envDefault:"info"`
}

// Validate checks relations between fields; it names the variable at fault.
func (c *ArchiverConfig) Validate() error {
	if c.ChunkRows < 1 {
		return fmt.Errorf("ARCHIVE_CHUNK_ROWS must be at least 1, got %d", c.ChunkRows)
	}
	if c.EventsDatabaseURL == "" && c.AuditDatabaseDSN == "" {
		return fmt.Errorf("set EVENTS_DATABASE_URL, AUDIT_DATABASE_DSN or both")
	}
	if c.Archive.Kind() == "" {
		return fmt.Errorf("ARCHIVE_TARGET is required (dir:///path or s3://bucket/prefix)")
	}
	return c.Archive.Resolve()
}
