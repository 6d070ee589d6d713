//go:build s3

package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"threatview/platform/testenv"
	"threatview/retention"
	"threatview/retention/internal/retentiontest"
	"threatview/retention/postgres"
)

// mustS3 returns an S3 store on a fresh prefix of a real S3-compatible
// server. These tests are built only with the tag s3 (`make test-s3`), which
// starts a local Versity S3 Gateway with scripts/s3.sh and runs them:
//
//	bash scripts/s3.sh start && set -a && . .run/s3.env && set +a
//	cd services/retention && go test -tags s3 ./store/
//
// Built with the tag, a missing ARCHIVE_TEST_S3_ENDPOINT is a failure, never
// a skip. ARCHIVE_TEST_S3_BUCKET (default threatview-test) is created if
// missing; credentials come from the AWS variables (.run/s3.env), or the
// local server's fixed test keys when unset.
func mustS3(t *testing.T) *S3 {
	t.Helper()
	endpoint := os.Getenv("ARCHIVE_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Fatal("ARCHIVE_TEST_S3_ENDPOINT is not set: run `bash scripts/s3.sh start` and source .run/s3.env (or use make test-s3)")
	}
	bucket := os.Getenv("ARCHIVE_TEST_S3_BUCKET")
	if bucket == "" {
		bucket = "threatview-test"
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", "threatview-test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "threatview-test-secret")
	}
	ctx := context.Background()
	cfg := retention.TargetConfig{Target: "s3", S3Endpoint: endpoint, S3Region: "us-east-1", S3Bucket: bucket,
		S3Prefix: testenv.Name("archive"), S3PathStyle: true}
	st, err := NewS3(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := st.api.(*s3.Client)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		var api smithy.APIError
		if !errors.As(err, &api) || (api.ErrorCode() != "BucketAlreadyOwnedByYou" && api.ErrorCode() != "BucketAlreadyExists") {
			t.Fatalf("create bucket %s at %s: %v", bucket, endpoint, err)
		}
	}
	return st
}

func TestS3_Contract(t *testing.T) {
	testContract(t, mustS3(t))
}

// Archive → cleanup → restore through a real S3-compatible store.
func TestS3_RoundTrip(t *testing.T) {
	st := mustS3(t)
	ctx := context.Background()
	url, db := retentiontest.Postgres(t)
	month := retentiontest.Month(-2)
	retentiontest.FillPostgres(t, db, month, 30)
	src, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	n0, h0, err := retention.ContentHash(ctx, src, retentiontest.Find(t, src, "events.events", month))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	a := &retention.Archiver{Src: src, Store: st, ChunkRows: 8, Log: log}
	if _, err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cl := &retention.Cleaner{Src: src, Months: 1, RequireArchive: true, Store: st, Log: log}
	if _, err := cl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Restore(ctx, "events.events", month); err != nil {
		t.Fatal(err)
	}
	n, h, err := retention.ContentHash(ctx, src, retentiontest.Find(t, src, "events.events", month))
	if err != nil || n != n0 || h != h0 {
		t.Errorf("after restore %d rows %s (%v), want %d rows %s", n, h, err, n0, h0)
	}
}

// An erasure's archive rewrite through a real S3-compatible store
// (retentiontest.RewriteWithout: the new version without the subject, the
// old version gone, cleanup and restore accept it).
func TestS3_RewriteWithout(t *testing.T) {
	retentiontest.RewriteWithout(t, mustS3(t))
}

// TestS3_EraseArchives: an erasure's rewrite of late and audit archives
// through S3 (retentiontest.EraseArchives).
func TestS3_EraseArchives(t *testing.T) {
	retentiontest.EraseArchives(t, mustS3(t))
}
