//go:build s3

package forward

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"

	"threatview/alerts"
	"threatview/platform/testenv"
)

// mustS3Sink returns the sink of an s3 forwarder on a fresh prefix of a
// real S3-compatible server (scripts/s3.sh; make test's phase 1b):
//
//	bash scripts/s3.sh start && set -a && . .run/s3.env && set +a
//	cd services/alerts && go test -tags s3 -run S3 ./forward/
//
// Built with the tag, a missing ARCHIVE_TEST_S3_ENDPOINT is a failure.
func mustS3Sink(t *testing.T, bucket string) (*S3, *s3.Client) {
	t.Helper()
	endpoint := os.Getenv("ARCHIVE_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Fatal("ARCHIVE_TEST_S3_ENDPOINT is not set: run `bash scripts/s3.sh start` and source .run/s3.env")
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", "threatview-test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "threatview-test-secret")
	}
	f := alerts.Forwarder{ID: uuid.NewString(), Type: alerts.ForwardS3, Format: alerts.FormatOCSF,
		URL: "s3://" + bucket + "/" + testenv.Name("siem")}
	sink, err := NewSink(&f, Config{Version: "test", Host: "host1", S3: S3Config{Endpoint: endpoint, Region: "us-east-1", PathStyle: true, Buckets: []string{bucket}}})
	if err != nil {
		t.Fatal(err)
	}
	s := sink.(*S3)
	return s, s.api.(*s3.Client)
}

// TestS3_Send checks that a batch becomes one object of OCSF lines, one per
// event in outbox order, that sending the same batch again (a retry after a
// failure the sink could not see) rewrites the same object rather than
// adding one, and that a bucket that cannot be written fails the batch so
// the cursor stays.
func TestS3_Send(t *testing.T) {
	ctx := context.Background()
	const bucket = "threatview-test"
	s, client := mustS3Sink(t, bucket)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		var api smithy.APIError
		if !errors.As(err, &api) || (api.ErrorCode() != "BucketAlreadyOwnedByYou" && api.ErrorCode() != "BucketAlreadyExists") {
			t.Fatalf("create bucket: %v", err)
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var events []alerts.Event
	for i := range 3 {
		events = append(events, alerts.Event{Seq: int64(41 + i), ID: uuid.NewString(), AppID: "app.s3",
			ReceivedAt: now, OccurredAt: now, Type: "threat", OS: "android", Country: "FR", Threats: []string{"root"}})
	}
	for range 2 {
		if err := s.Send(ctx, events); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(s.prefix)})
	if err != nil {
		t.Fatal(err)
	}
	want := s.Key(&events[0], &events[2])
	if len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != want {
		var keys []string
		for _, o := range list.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		t.Fatalf("objects under %s = %v, want only %s", s.prefix, keys, want)
	}
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(want)})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	sc := bufio.NewScanner(obj.Body)
	var n int
	for sc.Scan() {
		var o OCSF
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("line %d is not OCSF JSON: %v: %s", n+1, err, sc.Bytes())
		}
		if n >= len(events) || o.FindingInfo.UID != events[n].ID || o.ClassUID != 2004 {
			t.Fatalf("line %d = finding %q class %d, want event %d of %d in order", n+1, o.FindingInfo.UID, o.ClassUID, n+1, len(events))
		}
		n++
	}
	if n != len(events) {
		t.Fatalf("object holds %d lines, want %d", n, len(events))
	}

	missing, _ := mustS3Sink(t, "threatview-no-such-bucket-"+uuid.NewString()[:8])
	if err := missing.Send(ctx, events); err == nil {
		t.Fatal("Send to a missing bucket succeeded; the cursor would move past unsent events")
	}
}
