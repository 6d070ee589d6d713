package tokenauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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
