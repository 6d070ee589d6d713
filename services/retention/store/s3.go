package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"threatview/retention"
)

// S3API is the part of the S3 client the store uses.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// S3 is a Store in an S3-compatible bucket under a key prefix. A PutObject
// is atomic, and the archiver writes the manifest last, so a crash leaves
// no archive that looks complete.
type S3 struct {
	api    S3API
	bucket string
	prefix string // "" or "a/b/"
}

// NewS3 builds an S3 store from cfg; credentials come from the SDK's
// default chain.
func NewS3(ctx context.Context, cfg retention.TargetConfig) (*S3, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(cfg.S3Region))
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.S3Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.S3Endpoint)
		}
		o.UsePathStyle = cfg.S3PathStyle
	})
	return NewS3WithAPI(client, cfg.S3Bucket, cfg.S3Prefix), nil
}

// NewS3WithAPI returns a store using api for bucket under prefix.
func NewS3WithAPI(api S3API, bucket, prefix string) *S3 {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &S3{api: api, bucket: bucket, prefix: prefix}
}

// Put uploads data under key.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", s.Location(key), err)
	}
	return nil
}

// Get downloads key.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		var nsk *types.NoSuchKey
		var api smithy.APIError
		if errors.As(err, &nsk) || (errors.As(err, &api) && (api.ErrorCode() == "NotFound" || api.ErrorCode() == "NoSuchKey")) {
			return nil, fmt.Errorf("%s: %w", s.Location(key), retention.ErrNotFound)
		}
		return nil, fmt.Errorf("get %s: %w", s.Location(key), err)
	}
	return out.Body, nil
}

// List returns the keys under prefix, sorted (S3 lists in key order).
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.api, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + prefix)})
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

// Delete removes key.
func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		return fmt.Errorf("delete %s: %w", s.Location(key), err)
	}
	return nil
}

// Location renders key as an s3:// URL.
func (s *S3) Location(key string) string {
	return "s3://" + s.bucket + "/" + s.prefix + key
}
