package tokenauth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"threatview/collector/tokenauth"
)

// BenchmarkCheck_Hit measures a check answered from the cache: the
// collector's steady state. The upstream is a stub; it is asked once.
func BenchmarkCheck_Hit(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"active":true,"token_id":"0b0b2d6e-7a8f-4c3e-9d2a-1f2e3d4c5b6a","app_id":"demo-app"}`))
	}))
	defer up.Close()
	c, err := tokenauth.New(tokenauth.Config{URL: up.URL, InternalKey: "k"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	token := "tvk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	ctx := context.Background()
	if _, err := c.Check(ctx, token); err != nil {
		b.Fatal(err)
	}
	b.Run("Serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Check(ctx, token); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Check(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkWarm measures the collector's start-up warm-up of 50,000 tokens
// (TOKENS_WARM_LIMIT): one answer from the tokens service decoded and put in
// the cache. The upstream is a stub serving a fixed answer; the real
// service's query is measured apart (e2e/fault/coldstart_test.go logs it).
func BenchmarkWarm(b *testing.B) {
	const n = 50_000
	var body bytes.Buffer
	body.WriteString(`{"tokens":[`)
	for i := range n {
		if i > 0 {
			body.WriteByte(',')
		}
		h := sha256.Sum256([]byte(strconv.Itoa(i)))
		fmt.Fprintf(&body, `{"token_sha256":%q,"token_id":"0b0b2d6e-7a8f-4c3e-9d2a-%012d","app_id":"app-%d"}`, hex.EncodeToString(h[:]), i, i)
	}
	body.WriteString(`]}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body.Bytes())
	}))
	defer up.Close()
	b.SetBytes(int64(body.Len()))
	b.ReportAllocs()
	for b.Loop() {
		c, err := tokenauth.New(tokenauth.Config{URL: up.URL, InternalKey: "k", WarmLimit: n}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if got, err := c.Warm(context.Background()); err != nil || got != n {
			b.Fatalf("Warm() = %d, %v, want %d", got, err, n)
		}
	}
}
