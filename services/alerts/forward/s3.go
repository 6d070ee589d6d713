package forward

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"threatview/alerts"
)

// S3Config is where s3 forwarders' buckets are served; credentials come
// from the SDK's default chain (environment, web identity, instance role).
type S3Config struct {
	Endpoint  string // blank: AWS
	Region    string
	PathStyle bool
	// Buckets are the only buckets a forwarder may write to
	// (ALERTS_S3_BUCKETS): a forwarder stored before that list existed, or
	// after a bucket left it, does not start.
	Buckets []string
}

// s3Put is the part of the S3 client the sink uses.
type s3Put interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// S3 writes each batch as one object of OCSF NDJSON lines under the
// forwarder's prefix, named by the outbox positions it holds
// (<prefix><first seq>-<last seq>.ndjson, zero-padded so keys sort by
// their rows' numbers; with events shards a shard that commits late puts
// a lower number in a later batch, so the order is close to, not exactly,
// the order of sending). The cursor moves only after S3 has the object, so a
// failed or interrupted batch is written again under the same name when
// it is the same rows: at least once, duplicates carrying the same event id.
type S3 struct {
	api            s3Put
	bucket, prefix string
	version        string
	buf            []byte
}

// NewS3 returns the sink of an s3://bucket/prefix URL.
func NewS3(ctx context.Context, rawURL, version string, cfg S3Config) (*S3, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return nil, fmt.Errorf("s3 forwarder url %q is not s3://bucket/prefix", rawURL)
	}
	if !slices.Contains(cfg.Buckets, u.Host) {
		return nil, fmt.Errorf("s3 forwarder: bucket %s is not one of ALERTS_S3_BUCKETS", u.Host)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("s3 forwarder: load AWS config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3{api: client, bucket: u.Host, prefix: prefix, version: version}, nil
}

// Key is the object name of a batch from first to last.
func (s *S3) Key(first, last *alerts.Event) string {
	return fmt.Sprintf("%s%020d-%020d.ndjson", s.prefix, first.Seq, last.Seq)
}

// Send puts events as one object.
func (s *S3) Send(ctx context.Context, events []alerts.Event) error {
	if len(events) == 0 {
		return nil
	}
	s.buf = s.buf[:0]
	for i := range events {
		s.buf = AppendOCSF(s.buf, &events[i], s.version)
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	key := s.Key(&events[0], &events[len(events)-1])
	if _, err := s.api.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key),
		Body: bytes.NewReader(s.buf), ContentLength: aws.Int64(int64(len(s.buf))),
		ContentType: aws.String("application/x-ndjson")}); err != nil {
		return fmt.Errorf("s3 put %s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// Close releases nothing (the client keeps no connection it must close).
func (s *S3) Close() error { return nil }
