package main

import (
	"errors"
	"fmt"
	"time"

	"threatview/auditlogger/trail/s3store"
	"threatview/platform/httpserver"
	"threatview/platform/mq"
)

// Config is the configuration of audit-logger-worker, read from the
// environment.
type Config struct {
	HTTP        httpserver.Config
	Broker      mq.Config
	DatabaseDSN string `env:"AUDIT_DATABASE_DSN" secret:"true"`
	Queue       string `env:"AUDITWORKER_QUEUE" envDefault:"/queue/threatview.audit"`
	// Prefetch is how many unacknowledged messages the broker hands over.
	Prefetch int `env:"AUDITWORKER_PREFETCH" envDefault:"200"`
	// BatchMax is how many records one transaction stores at most.
	BatchMax int `env:"AUDITWORKER_BATCH_MAX" envDefault:"2000"`
	// BatchMaxWait is how long a batch waits to fill before it is stored.
	BatchMaxWait time.Duration `env:"AUDITWORKER_BATCH_MAX_WAIT" envDefault:"50ms"`
	// PartitionsAhead is how many monthly partitions after the current one
	// the worker tries to keep (needs ALTER; see README).
	PartitionsAhead int `env:"AUDITWORKER_PARTITIONS_AHEAD" envDefault:"3"`
	// LockTimeout is how long one GET_LOCK call waits before trying again.
	LockTimeout time.Duration `env:"AUDITWORKER_LOCK_TIMEOUT" envDefault:"5s"`
	LogLevel    string        `env:"LOG_LEVEL" envDefault:"info"`
	// SigningKeys are the Ed25519 seeds (base64, comma-separated; the first
	// signs, the others are retired keys) for the trail's checkpoints. From
	// a Secret, never the audit database. Blank: rows are chained but no
	// checkpoint is signed.
	SigningKeys string `env:"AUDIT_SIGNING_KEYS" secret:"true"`
	// TrailDir receives every checkpoint and leaf bundle outside the
	// database (a volume; in production an S3 bucket with Object Lock).
	TrailDir string `env:"AUDIT_TRAIL_DIR"`
	// TrailS3 is the bucket receiving every checkpoint and leaf bundle
	// (AUDIT_TRAIL_S3_BUCKET, with the archive's ARCHIVE_S3_* endpoint
	// settings and Object Lock headers from AUDIT_TRAIL_S3_LOCK_*).
	TrailS3 s3store.Env
	// CheckpointEvery is how often a checkpoint is signed (and at shutdown).
	CheckpointEvery time.Duration `env:"AUDITWORKER_CHECKPOINT_EVERY" envDefault:"10s"`
}

// Validate checks the relations between fields; the error names the variable.
func (c *Config) Validate() error {
	switch {
	case c.DatabaseDSN == "":
		return errors.New("AUDIT_DATABASE_DSN is required")
	case c.Queue == "":
		return errors.New("AUDITWORKER_QUEUE must not be empty")
	case c.Prefetch < 1:
		return errors.New("AUDITWORKER_PREFETCH must be at least 1")
	case c.BatchMax < 1:
		return errors.New("AUDITWORKER_BATCH_MAX must be at least 1")
	case c.BatchMaxWait < 0:
		return errors.New("AUDITWORKER_BATCH_MAX_WAIT must not be negative")
	case c.PartitionsAhead < 0:
		return errors.New("AUDITWORKER_PARTITIONS_AHEAD must not be negative")
	case c.CheckpointEvery < 100*time.Millisecond || c.CheckpointEvery > 10*time.Second:
		return errors.New("AUDITWORKER_CHECKPOINT_EVERY must be from 100ms to 10s")
	case c.TrailS3.LockDays < 0:
		return errors.New("AUDIT_TRAIL_S3_LOCK_DAYS must not be negative")
	case c.TrailS3.Bucket != "" && c.TrailS3.Config().Validate() != nil:
		return fmt.Errorf("AUDIT_TRAIL_S3_LOCK_MODE, AUDIT_TRAIL_S3_LOCK_DAYS: %w", c.TrailS3.Config().Validate())
	case c.LockTimeout < time.Second:
		return errors.New("AUDITWORKER_LOCK_TIMEOUT must be at least 1s")
	}
	return nil
}
