package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/platform/testenv"
)

// metric reads one sample (name with its labels, as exposed) from /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s = %q", name, v)
			}
			return f
		}
	}
	t.Fatalf("metric %s not exposed", name)
	return 0
}

func randomToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "tvk_" + base64.RawURLEncoding.EncodeToString(b)
}

// TestRun_LookupCapIsNotUnauthorized: a valid token that meets the lookup
// cap (spent by a flood of random tokens from the same address) is answered
// 429 with Retry-After and the JSON error body, never 401, and gets 202
// once it retries after that wait.
func TestRun_LookupCapIsNotUnauthorized(t *testing.T) {
	s := mustStack(t)
	base := startCollector(t, s.env(map[string]string{"TOKENS_CLIENT_LOOKUP_RATE": "0.5"}))
	testenv.MustPing(t, 10*time.Second, "warm-up done", func() error {
		if metric(t, base, "collector_token_cache_warmed_total") == 0 {
			return errors.New("not warmed yet")
		}
		return nil
	})
	app := "coldstart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	token := s.newToken(t, app) // created after the warm-up: not cached

	limited := 0
	for i := range 40 {
		r := postEvents(t, base, randomToken(t), event(app, ""), nil)
		switch r.status {
		case http.StatusUnauthorized:
			if limited > 0 {
				t.Fatalf("random token #%d = 401 after the cap was reached", i)
			}
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("random token #%d = %d %s, want 401 or 429", i, r.status, r.body)
		}
	}
	if limited == 0 {
		t.Fatal("40 random tokens from one address never met the per-client lookup cap")
	}
	r := postEvents(t, base, token, event(app, ""), nil)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("valid token over the lookup cap = %d %s, want 429 (never 401 for load)", r.status, r.body)
	}
	if code := r.errorCode(t); code != "rate_limited" {
		t.Errorf("code = %q, want rate_limited", code)
	}
	after, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || after < 1 || after > 60 {
		t.Fatalf("Retry-After = %q, want whole seconds from 1 to 60", r.header.Get("Retry-After"))
	}
	time.Sleep(time.Duration(after) * time.Second)
	r = postEvents(t, base, token, event(app, ""), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("valid token after Retry-After = %d %s, want 202", r.status, r.body)
	}
}

// TestRun_WarmStart: a collector started after a token was created knows
// it from its bulk warm-up: the token's first request is a cache hit, with
// no introspection.
func TestRun_WarmStart(t *testing.T) {
	s := mustStack(t)
	app := "warmstart-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	token := s.newToken(t, app)
	base := startCollector(t, s.env(nil))
	testenv.MustPing(t, 10*time.Second, "warm-up done", func() error {
		if metric(t, base, "collector_token_cache_warmed_total") == 0 {
			return errors.New("not warmed yet")
		}
		return nil
	})
	if r := postEvents(t, base, token, event(app, ""), nil); r.status != http.StatusAccepted {
		t.Fatalf("POST with a token created before the start = %d %s, want 202", r.status, r.body)
	}
	if n := metric(t, base, "collector_token_lookups_total"); n != 0 {
		t.Errorf("introspections after the warm-up = %v, want 0", n)
	}
	if n := metric(t, base, `collector_token_cache_entries{kind="active"}`); n < 1 {
		t.Errorf("active cache entries = %v, want at least 1", n)
	}
}
