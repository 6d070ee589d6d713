//go:build s3

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"threatview/auditlogger/internal/audittest"
	"threatview/auditlogger/internal/s3test"
	"threatview/auditlogger/mariadb"
	"threatview/auditlogger/trail"
	"threatview/auditlogger/trail/s3store"
)

// countingStore counts the checkpoint objects read.
type countingStore struct {
	*s3store.Store
	checkpointGets int
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "checkpoints/") {
		c.checkpointGets++
	}
	return c.Store.Get(ctx, key)
}

// TestRun_S3: the worker's checkpointer writes to a real S3 server;
// auditverify reads the checkpoints and leaf bundles from it, reading only
// the checkpoints it needs, and names a checkpoint replaced in the bucket.
func TestRun_S3(t *testing.T) {
	ctx := context.Background()
	dsn, db := audittest.MustDB(t)
	signer := newSigner(t)
	env := s3test.Env(t, "")
	st, err := s3store.New(ctx, env.Config())
	if err != nil {
		t.Fatal(err)
	}
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: st, Signer: signer}
	t0 := time.Now().Add(-time.Hour)
	const rounds = 6
	for i := range rounds {
		if _, err := mariadb.New(db).Insert(ctx, audittest.Records(20, t0.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Once(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := st.List(ctx, "checkpoints/"); err != nil || len(keys) != rounds {
		t.Fatalf("the bucket holds checkpoints %v (%v), want %d", keys, err, rounds)
	}
	vars := map[string]string{"AUDIT_DATABASE_DSN": dsn, "AUDIT_PUBLIC_KEYS": base64.StdEncoding.EncodeToString(signer.Public()),
		"ARCHIVE_S3_ENDPOINT": env.Endpoint, "ARCHIVE_S3_REGION": env.Region, "ARCHIVE_S3_FORCE_PATH_STYLE": "true",
		"AUDIT_TRAIL_S3_BUCKET": env.Bucket, "AUDIT_TRAIL_S3_PREFIX": env.Prefix}
	getenv := func(k string) string { return vars[k] }
	var out bytes.Buffer

	t.Run("OK", func(t *testing.T) {
		out.Reset()
		if err := run(ctx, getenv, &out); err != nil || !strings.Contains(out.String(), "checked "+strconv.Itoa(20*rounds)+" rows") {
			t.Fatalf("run = %v, output %q", err, out.String())
		}
	})
	t.Run("ReadsOnlyWhatItNeeds", func(t *testing.T) {
		cs := &countingStore{Store: st}
		keys, _ := trail.ParsePublicKeys(vars["AUDIT_PUBLIC_KEYS"])
		rep, err := trail.Verify(ctx, mariadb.NewTrail(db), trail.StoreReference{Store: cs}, keys, trail.Options{})
		if err != nil || !rep.OK {
			t.Fatalf("Verify = %+v, %v", rep, err)
		}
		// The database's newest checkpoint is the bucket's newest: one GET.
		if cs.checkpointGets != 1 {
			t.Errorf("read %d checkpoints of %d, want 1", cs.checkpointGets, rounds)
		}
	})
	t.Run("ReplacedCheckpoint", func(t *testing.T) {
		keys, err := st.List(ctx, "checkpoints/")
		if err != nil {
			t.Fatal(err)
		}
		newest := keys[len(keys)-1]
		old, err := st.Get(ctx, newest)
		if err != nil {
			t.Fatal(err)
		}
		var c trail.Checkpoint
		if err := json.Unmarshal(old, &c); err != nil {
			t.Fatal(err)
		}
		c.Size-- // an attacker without the key shortens the signed tree
		// Without Object Lock a plain PUT (no If-None-Match) replaces it.
		bucket, key := s3test.BucketKey(t, st, newest)
		if _, err := st.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: bytes.NewReader(trail.MarshalCheckpoint(&c))}); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		err = run(ctx, getenv, &out)
		if !errors.Is(err, errProblems) || !strings.Contains(out.String(), "bad_signature\tcheckpoint "+strconv.FormatUint(c.Size, 10)+"@") {
			t.Fatalf("run = %v, output %q; want the replaced checkpoint named bad_signature", err, out.String())
		}
	})
}

// switchStore sends puts to down until up is set.
type switchStore struct {
	trail.ObjectStore
	down trail.ObjectStore
	up   atomic.Bool
}

func (s *switchStore) Put(ctx context.Context, key string, data []byte) error {
	if !s.up.Load() {
		return s.down.Put(ctx, key, data)
	}
	return s.ObjectStore.Put(ctx, key, data)
}

// TestCheckpointer_S3Outage: while S3 cannot be reached, checkpoints fail
// (each failure counted) and records are still stored; the first checkpoint
// after S3 returns covers every leaf since the last one, and the trail
// verifies from the bucket.
func TestCheckpointer_S3Outage(t *testing.T) {
	ctx := context.Background()
	dsn, db := audittest.MustDB(t)
	signer := newSigner(t)
	env := s3test.Env(t, "")
	st, err := s3store.New(ctx, env.Config())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there: every request is refused
	downEnv := env
	downEnv.Endpoint = "http://" + closed
	down, err := s3store.New(ctx, downEnv.Config())
	if err != nil {
		t.Fatal(err)
	}
	sw := &switchStore{ObjectStore: st, down: down}
	var failures atomic.Int64
	cp := &trail.Checkpointer{DB: mariadb.NewTrail(db), Store: sw, Signer: signer, Log: slog.New(slog.DiscardHandler),
		OnError: func(error) { failures.Add(1) }, Timeout: 5 * time.Second}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(rctx, 200*time.Millisecond) }()
	t0 := time.Now().Add(-time.Hour)
	for i := range 5 {
		if _, err := mariadb.New(db).Insert(ctx, audittest.Records(30, t0.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatalf("insert during the outage: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if failures.Load() == 0 {
		t.Fatal("no checkpoint failure counted while S3 was unreachable")
	}
	if n, err := mariadb.NewTrail(db).LatestCheckpoint(ctx); err != nil || n != nil {
		t.Fatalf("a checkpoint reached the database without reaching S3: %+v, %v", n, err)
	}
	sw.up.Store(true)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := mariadb.NewTrail(db).LatestCheckpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c != nil && c.Size == 150 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of all 150 leaves after S3 returned: %+v", c)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done
	vars := map[string]string{"AUDIT_DATABASE_DSN": dsn, "AUDIT_PUBLIC_KEYS": base64.StdEncoding.EncodeToString(signer.Public()),
		"ARCHIVE_S3_ENDPOINT": env.Endpoint, "ARCHIVE_S3_FORCE_PATH_STYLE": "true",
		"AUDIT_TRAIL_S3_BUCKET": env.Bucket, "AUDIT_TRAIL_S3_PREFIX": env.Prefix}
	var out bytes.Buffer
	if err := run(ctx, func(k string) string { return vars[k] }, &out); err != nil || !strings.Contains(out.String(), "checked 150 rows") {
		t.Fatalf("run after the outage = %v, output %q", err, out.String())
	}
}
