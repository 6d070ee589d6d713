// Package s3store keeps the audit trail's checkpoints and leaf bundles in an
// S3 bucket (a trail.ObjectStore). Every object is written once: a put sends
// If-None-Match: * and, when the bucket already holds the key, succeeds only
// if the stored bytes are the same (a retried write) and otherwise fails with
// trail.ErrExists. With Object Lock configured each put also carries the
// retention headers, so that in compliance mode not even the bucket's owner
// can replace or delete a checkpoint before its retention ends.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"threatview/auditlogger/trail"
)

// Config is where the trail's objects go: the archive's endpoint settings
// and a bucket and prefix of the trail's own. Credentials come from the AWS
// SDK's default chain (environment, web identity, instance role).
type Config struct {
	Endpoint  string // blank: AWS
	Region    string
	PathStyle bool
	Bucket    string
	Prefix    string // "" or "a/b"
	// LockMode is "" (no Object Lock headers), "COMPLIANCE" or "GOVERNANCE";
	// LockFor is the retention each object gets from its write.
	LockMode string
	LockFor  time.Duration
}

// API is the part of the S3 client the store uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// Store is a trail.ObjectStore in an S3 bucket.
type Store struct {
	api    API
	cfg    Config
	prefix string // "" or "a/b/"
	now    func() time.Time
}

// Validate checks the lock settings.
func (c Config) Validate() error {
	switch c.LockMode {
	case "":
	case string(types.ObjectLockModeCompliance), string(types.ObjectLockModeGovernance):
		if c.LockFor <= 0 {
			return errors.New("an Object Lock mode needs a positive retention")
		}
	default:
		return fmt.Errorf("Object Lock mode %q: want COMPLIANCE, GOVERNANCE or blank", c.LockMode)
	}
	if c.Bucket == "" {
		return errors.New("no bucket")
	}
	return nil
}

// New returns the store cfg names, with a client from the SDK's defaults.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	return NewWithAPI(client, cfg), nil
}

// NewWithAPI returns the store using api.
func NewWithAPI(api API, cfg Config) *Store {
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &Store{api: api, cfg: cfg, prefix: prefix, now: time.Now}
}

// Client returns the S3 client (tests create buckets with it).
func (s *Store) Client() API { return s.api }

// Location renders key as an s3:// URL.
func (s *Store) Location(key string) string {
	return "s3://" + s.cfg.Bucket + "/" + s.prefix + key
}

// Put implements trail.ObjectStore: the object is created only if the key
// is free; an existing object with the same bytes is a success (a retry),
// with other bytes trail.ErrExists.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch:   aws.String("*"),
	}
	if s.cfg.LockMode != "" {
		in.ObjectLockMode = types.ObjectLockMode(s.cfg.LockMode)
		in.ObjectLockRetainUntilDate = aws.Time(s.now().Add(s.cfg.LockFor).UTC())
		// Object Lock puts must carry an integrity checksum.
		in.ChecksumAlgorithm = types.ChecksumAlgorithmSha256
	}
	_, err := s.api.PutObject(ctx, in)
	if err == nil {
		return nil
	}
	if !taken(err) {
		return fmt.Errorf("put %s: %w", s.Location(key), err)
	}
	old, gerr := s.Get(ctx, key)
	if gerr != nil {
		return fmt.Errorf("put %s: the key is taken and cannot be read: %w", s.Location(key), gerr)
	}
	if bytes.Equal(old, data) {
		return nil
	}
	return fmt.Errorf("put %s: %w", s.Location(key), trail.ErrExists)
}

// taken reports whether a put failed because the key already holds an
// object (If-None-Match: 412, or 409 for a concurrent conditional write).
func taken(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "PreconditionFailed", "ConditionalRequestConflict":
			return true
		}
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode() == 412
	}
	return false
}

// Get implements trail.ObjectStore; a missing key wraps fs.ErrNotExist.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		var nsk *types.NoSuchKey
		var api smithy.APIError
		if errors.As(err, &nsk) || (errors.As(err, &api) && (api.ErrorCode() == "NotFound" || api.ErrorCode() == "NoSuchKey")) {
			return nil, fmt.Errorf("%s: %w", s.Location(key), fs.ErrNotExist)
		}
		return nil, fmt.Errorf("get %s: %w", s.Location(key), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.Location(key), err)
	}
	return b, nil
}

// List implements trail.ObjectStore (S3 lists in key order).
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	return s.ListAfter(ctx, prefix, "")
}

// ListAfter implements trail.ListerAfter: the keys under prefix that sort
// after after, without listing the ones before it.
func (s *Store) ListAfter(ctx context.Context, prefix, after string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(s.prefix + prefix)}
	if after != "" {
		in.StartAfter = aws.String(s.prefix + after)
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s.Location(prefix), err)
		}
		for _, o := range page.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), s.prefix))
		}
	}
	return keys, nil
}

// Env is the trail's object store configuration as every command of the
// audit logger reads it: the archive's endpoint settings (ARCHIVE_S3_*, the
// archiver's own variables) and the trail's bucket and prefix.
type Env struct {
	Endpoint  string `env:"ARCHIVE_S3_ENDPOINT"`
	Region    string `env:"ARCHIVE_S3_REGION" envDefault:"us-east-1"`
	PathStyle bool   `env:"ARCHIVE_S3_FORCE_PATH_STYLE" envDefault:"false"`
	// Bucket receives the checkpoints and leaf bundles (normally the
	// archive's bucket); blank: no S3 copy.
	Bucket string `env:"AUDIT_TRAIL_S3_BUCKET"`
	// Prefix is the key prefix of the trail's objects in Bucket.
	Prefix string `env:"AUDIT_TRAIL_S3_PREFIX" envDefault:"audit-trail"`
	// LockMode, for the worker: COMPLIANCE or GOVERNANCE sends Object Lock
	// retention headers with every put (the bucket must have Object Lock
	// enabled); blank sends none and relies on the bucket's default
	// retention, if any.
	LockMode string `env:"AUDIT_TRAIL_S3_LOCK_MODE"`
	// LockDays is the retention each object gets (at least the audit
	// retention).
	LockDays int `env:"AUDIT_TRAIL_S3_LOCK_DAYS" envDefault:"0"`
}

// Config returns the store configuration e names.
func (e Env) Config() Config {
	return Config{Endpoint: e.Endpoint, Region: e.Region, PathStyle: e.PathStyle, Bucket: e.Bucket, Prefix: e.Prefix,
		LockMode: e.LockMode, LockFor: time.Duration(e.LockDays) * 24 * time.Hour}
}

// Open returns the trail's object store: the bucket e names and the
// directory dir, each when set (both: a trail.Mirror writing to the bucket,
// then the directory, and reading from the bucket); nil when neither is.
// wrap, when not nil, wraps each ("s3" or "dir") before it is used (the
// worker counts failed writes by store).
func Open(ctx context.Context, dir string, e Env, wrap func(kind string, s trail.ObjectStore) trail.ObjectStore) (trail.ObjectStore, error) {
	if wrap == nil {
		wrap = func(_ string, s trail.ObjectStore) trail.ObjectStore { return s }
	}
	var stores trail.Mirror
	if e.Bucket != "" {
		s, err := New(ctx, e.Config())
		if err != nil {
			return nil, fmt.Errorf("AUDIT_TRAIL_S3_*: %w", err)
		}
		stores = append(stores, wrap("s3", s))
	}
	if dir != "" {
		stores = append(stores, wrap("dir", trail.Dir{Root: dir}))
	}
	switch len(stores) {
	case 0:
		return nil, nil
	case 1:
		return stores[0], nil
	}
	return stores, nil
}
