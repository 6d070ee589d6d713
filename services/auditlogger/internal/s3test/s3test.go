// Package s3test gives tests a trail store on a fresh prefix of a real
// S3-compatible server. The tests using it are built with the tag s3 (run
// by make test's S3 phase, which starts the local Versity S3 Gateway with
// scripts/s3.sh):
//
//	bash scripts/s3.sh start && set -a && . .run/s3.env && set +a
//	cd services/auditlogger && go test -tags s3 ./trail/s3store/ ./cmd/auditverify/ ./cmd/auditworker/
//
// A missing ARCHIVE_TEST_S3_ENDPOINT is a failure, never a skip.
package s3test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"threatview/auditlogger/trail/s3store"
	"threatview/platform/testenv"
)

// Env returns the store settings of a fresh prefix in the test bucket (a
// bucket with Object Lock enabled when lockMode is set), creating the
// bucket if needed, with credentials set in the environment.
func Env(tb testing.TB, lockMode string) s3store.Env {
	tb.Helper()
	endpoint := os.Getenv("ARCHIVE_TEST_S3_ENDPOINT")
	if endpoint == "" {
		tb.Fatal("ARCHIVE_TEST_S3_ENDPOINT is not set: run `bash scripts/s3.sh start` and source .run/s3.env")
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		tb.Setenv("AWS_ACCESS_KEY_ID", "threatview-test")
		tb.Setenv("AWS_SECRET_ACCESS_KEY", "threatview-test-secret")
	}
	e := s3store.Env{Endpoint: endpoint, Region: "us-east-1", PathStyle: true, Bucket: "threatview-test-audit",
		Prefix: testenv.Name("trail")}
	if lockMode != "" {
		e.Bucket, e.LockMode, e.LockDays = "threatview-test-audit-locked", lockMode, 1
	}
	st, err := s3store.New(context.Background(), e.Config())
	if err != nil {
		tb.Fatal(err)
	}
	_, err = st.Client().(*s3.Client).CreateBucket(context.Background(), &s3.CreateBucketInput{
		Bucket: aws.String(e.Bucket), ObjectLockEnabledForBucket: aws.Bool(lockMode != "")})
	var api smithy.APIError
	if err != nil && (!errors.As(err, &api) || (api.ErrorCode() != "BucketAlreadyOwnedByYou" && api.ErrorCode() != "BucketAlreadyExists")) {
		tb.Fatalf("create bucket %s at %s: %v", e.Bucket, endpoint, err)
	}
	return e
}

// Store returns a store on Env(tb, lockMode).
func Store(tb testing.TB, lockMode string) *s3store.Store {
	tb.Helper()
	st, err := s3store.New(context.Background(), Env(tb, lockMode).Config())
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// BucketKey returns the bucket and full object key of key in st.
func BucketKey(tb testing.TB, st *s3store.Store, key string) (bucket, full string) {
	tb.Helper()
	loc := st.Location(key) // s3://bucket/prefix/key
	rest := loc[len("s3://"):]
	for i := range rest {
		if rest[i] == '/' {
			return rest[:i], rest[i+1:]
		}
	}
	tb.Fatalf("bad location %s", loc)
	return "", ""
}
