//go:build fault

package fault

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/loadtest/procstat"
	"threatview/platform/testenv"
)

// TestFault_ColdStartValidTokens: a freshly restarted collector (empty
// token cache) meets many valid apps at once (300; COLDSTART_APPS to change)
// while a flood of random well-formed tokens arrives beside them. No valid
// token may ever be answered 401; every app, retrying 429/503 after
// Retry-After as the SDK does, gets its 202; the random tokens get only 401
// or 429/503 (never a 202 or a 5xx other than 503); and each accepted event
// is stored exactly once. It logs the time until every app had its 202 and
// the collector's CPU over that time.
func TestFault_ColdStartValidTokens(t *testing.T) {
	env := e2etest.MustEnv(t)
	n := 300
	if v := os.Getenv("COLDSTART_APPS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("COLDSTART_APPS=%q: want a positive integer", v)
		}
	}
	apps := newApps(t, env, n)
	since := time.Now().Add(-time.Second)

	t.Cleanup(func() { testenv.Stack(t, "up") })
	testenv.Stack(t, "restart", "collector")
	procs, err := procstat.FromPidDir(filepath.Join(testenv.Root(t), ".run", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	procs = slices.DeleteFunc(procs, func(p procstat.Proc) bool { return p.Name != "collector" && p.Name != "tokens" })
	cpu := procstat.StartCPU(context.Background(), procs)
	start := time.Now()

	tr := &http.Transport{MaxIdleConnsPerHost: 2 * n, IdleConnTimeout: 30 * time.Second}
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	defer tr.CloseIdleConnections()

	// The flood: random tokens as fast as 4 senders go, until the apps are in.
	floodCtx, stopFlood := context.WithCancel(context.Background())
	var floodWG sync.WaitGroup
	var floodMu sync.Mutex
	floodStatus := map[int]int{}
	for range 4 {
		floodWG.Add(1)
		go func() {
			defer floodWG.Done()
			for floodCtx.Err() == nil {
				status, _, _ := postOne(client, env.CollectorURL, randomAppToken(t), e2etest.GoodEvent("flood-app", e2etest.UUID()))
				floodMu.Lock()
				floodStatus[status]++
				floodMu.Unlock()
			}
		}()
	}

	// The flood goes first, so that the lookup caps are spent when the apps
	// arrive (the adversarial order).
	time.Sleep(time.Second)
	start = time.Now()

	type result struct {
		took     time.Duration
		attempts int
		statuses []int
		err      string
	}
	results := make([]result, n)
	deadline := start.Add(2 * time.Minute)
	var wg sync.WaitGroup
	var in atomic.Int64
	for i, app := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			body := e2etest.GoodEvent(app.ID, app.eventID) // one id: a retry is the same event
			for time.Now().Before(deadline) {
				r.attempts++
				status, after, err := postOne(client, env.CollectorURL, app.Token, body)
				r.statuses = append(r.statuses, status)
				switch {
				case status == http.StatusAccepted:
					r.took = time.Since(start)
					in.Add(1)
					return
				case status == http.StatusUnauthorized:
					r.err = "401 for a valid token"
					return
				case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
					if after < time.Second {
						r.err = fmt.Sprintf("%d without a Retry-After of at least 1 s", status)
						return
					}
					// The SDK's wait: Retry-After plus up to a tenth more.
					time.Sleep(after + mrand.N(after/10+time.Millisecond))
				default:
					r.err = fmt.Sprintf("status %d (%v)", status, err)
					time.Sleep(time.Second)
				}
			}
			if r.err == "" {
				r.err = "no 202 within 2 minutes"
			}
		}()
	}
	wg.Wait()
	allIn := time.Since(start)
	usage := cpu.Stop()
	stopFlood()
	floodWG.Wait()

	var took []time.Duration
	retries, failed := 0, 0
	for i, r := range results {
		retries += r.attempts - 1
		if r.err != "" || r.took == 0 {
			failed++
			if failed <= 10 {
				t.Errorf("app %s: %s (answers %v)", apps[i].ID, r.err, r.statuses)
			}
			continue
		}
		took = append(took, r.took)
	}
	if failed > 0 {
		t.Fatalf("%d of %d valid apps did not get their 202 cleanly", failed, n)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	floodMu.Lock()
	flood := fmt.Sprint(floodStatus)
	for status, c := range floodStatus {
		if status != http.StatusUnauthorized && status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
			t.Errorf("random tokens: %d answered %d, want only 401, 429 or 503", c, status)
		}
	}
	floodMu.Unlock()
	var cpus []string
	for _, u := range usage {
		cpus = append(cpus, fmt.Sprintf("%s %.2f s", u.Name, u.CPUSeconds))
	}
	t.Logf("cold start: %d valid apps, arriving at once 1 s after the restart returned into a random-token flood, all 202 in %.2f s (p50 %.0f ms, p95 %.0f ms, max %.0f ms), %d retries; CPU from the restart to the last 202: %s; random-token flood answers %s",
		n, allIn.Seconds(), ms(took[len(took)/2]), ms(took[len(took)*95/100]), ms(took[len(took)-1]), retries, strings.Join(cpus, ", "), flood)

	// Every accepted event is stored exactly once.
	ids := make([]string, n)
	for i, a := range apps {
		ids[i] = a.ID
	}
	pool := e2etest.Events(t, env)
	var rows, distinct int
	// The processor may have a backlog to drain first.
	err = e2etest.WaitFor(3*time.Minute, func() (bool, error) {
		err := pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT (app_id, id)) FROM events.events
			WHERE app_id = ANY($1) AND received_at >= $2`, ids, since).Scan(&rows, &distinct)
		return err == nil && rows >= n, err
	})
	if err != nil || rows != n || distinct != n {
		t.Fatalf("stored rows for the %d apps = %d (%d distinct), want %d once each: %v", n, rows, distinct, n, err)
	}
}

type coldApp struct {
	e2etest.App
	eventID string
}

// newApps creates n apps with a token each, 8 at a time.
func newApps(t *testing.T, env e2etest.Env, n int) []coldApp {
	t.Helper()
	apps := make([]coldApp, n)
	eachApp(n, func(i int) { apps[i] = coldApp{App: e2etest.NewApp(t, env, "cold"), eventID: e2etest.UUID()} })
	// Revoked afterwards, so that runs do not pile up active tokens for
	// every collector's warm-up.
	t.Cleanup(func() {
		var failed atomic.Int64
		eachApp(n, func(i int) {
			r, err := e2etest.TryDo(http.MethodDelete, env.TokensURL+"/v1/tokens/"+apps[i].TokenID, env.AdminKey, nil, nil)
			if err != nil || r.Status != http.StatusNoContent {
				failed.Add(1)
			}
		})
		if f := failed.Load(); f > 0 {
			t.Logf("%d of %d test tokens not revoked", f, n)
		}
	})
	return apps
}

// eachApp runs f(0..n-1), 8 at a time.
func eachApp(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// postOne posts body with token and returns the status and the Retry-After
// (0 when absent); status 0 is a transport error.
func postOne(c *http.Client, base, token string, body []byte) (int, time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return resp.StatusCode, time.Duration(secs) * time.Second, nil
}

// randomAppToken is a well-formed token nobody issued.
func randomAppToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Error(err)
	}
	return "tvk_" + base64.RawURLEncoding.EncodeToString(b)
}

func ms(d time.Duration) float64 { return float64(d.Milliseconds()) }
