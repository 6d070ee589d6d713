//go:build s3

package s3store_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"threatview/auditlogger/internal/s3test"
	"threatview/auditlogger/trail"
	"threatview/auditlogger/trail/s3store"
)

// These tests are built only with the tag s3 and run against a real
// S3-compatible server (scripts/s3.sh; see s3test.Env).

func TestS3_WriteOnce(t *testing.T) {
	ctx := context.Background()
	st := s3test.Store(t, "")
	if err := st.Put(ctx, "checkpoints/a.json", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "checkpoints/a.json", []byte("one")); err != nil {
		t.Errorf("same bytes again = %v, want nil (a retried write)", err)
	}
	if err := st.Put(ctx, "checkpoints/a.json", []byte("two")); !errors.Is(err, trail.ErrExists) {
		t.Errorf("other bytes = %v, want ErrExists", err)
	}
	if b, err := st.Get(ctx, "checkpoints/a.json"); err != nil || string(b) != "one" {
		t.Errorf("after a refused overwrite the object holds %q, %v; want one", b, err)
	}
	if _, err := st.Get(ctx, "checkpoints/none.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Get of a missing key = %v, want ErrNotExist", err)
	}
	for _, k := range []string{"checkpoints/b.json", "checkpoints/c.json", "leaves/x.bin"} {
		if err := st.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := st.ListAfter(ctx, "checkpoints/", "checkpoints/a.json"); err != nil || len(keys) != 2 || keys[0] != "checkpoints/b.json" {
		t.Errorf("ListAfter = %v, %v; want b and c", keys, err)
	}
	if keys, err := st.List(ctx, "checkpoints/"); err != nil || len(keys) != 3 {
		t.Errorf("List = %v, %v; want 3 keys", keys, err)
	}
}

// With a lock mode configured every object is written with its Object Lock
// retention, which the server then reports.
func TestS3_ObjectLock(t *testing.T) {
	ctx := context.Background()
	st := s3test.Store(t, "GOVERNANCE")
	data := []byte(`{"size":1}`)
	if err := st.Put(ctx, "checkpoints/l.json", data); err != nil {
		t.Fatal(err)
	}
	client := st.Client().(*s3.Client)
	bucket, key := s3test.BucketKey(t, st, "checkpoints/l.json")
	out, err := client.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObjectRetention: %v", err)
	}
	if out.Retention == nil || out.Retention.Mode != types.ObjectLockRetentionModeGovernance ||
		out.Retention.RetainUntilDate == nil || out.Retention.RetainUntilDate.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("retention = %+v, want GOVERNANCE for a day", out.Retention)
	}
}

var _ trail.ListerAfter = (*s3store.Store)(nil)
