//go:build fault

package fault

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// feedMetric reads one unlabelled sample from a service's /metrics.
func feedMetric(t *testing.T, url, name string) float64 {
	t.Helper()
	r := e2etest.Do(t, http.MethodGet, url+"/metrics", "", nil, nil)
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s = %q: %v", name, v, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not found at %s/metrics", name, url)
	return 0
}

// TestFault_TokensKilledAfterRevoke: the tokens service is killed -9 right
// after a revocation answers 204. The collector must refuse the revoked
// token within 30 s of that answer (with the revocation feed, at once)
// while a good token keeps working through the outage, past its cache TTL
// (served stale), and every 202 must be stored exactly once.
func TestFault_TokensKilledAfterRevoke(t *testing.T) {
	env := e2etest.MustEnv(t)
	t.Cleanup(func() { testenv.Stack(t, "start", "tokens") })
	good := e2etest.NewApp(t, env, "fault-rev-good")
	doomed := e2etest.NewApp(t, env, "fault-rev-doomed")
	since := time.Now().Add(-time.Minute)

	// The feed must have been up since before the tokens are confirmed.
	if err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		return feedMetric(t, env.CollectorURL, "collector_token_revocation_feed_up") == 1, nil
	}); err != nil {
		t.Fatalf("collector's revocation feed not up: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)

	post := func(app e2etest.App) (int, string) {
		id := e2etest.UUID()
		r, err := e2etest.TryDo(http.MethodPost, env.CollectorURL+"/v1/events", app.Token, e2etest.GoodEvent(app.ID, id), nil)
		if err != nil {
			return 0, id
		}
		return r.Status, id
	}
	accepted := map[string][]string{} // app → event ids answered 202
	for _, app := range []e2etest.App{good, doomed} {
		st, id := post(app)
		if st != http.StatusAccepted {
			t.Fatalf("first event of %s = %d, want 202", app.ID, st)
		}
		accepted[app.ID] = append(accepted[app.ID], id)
	}
	staleBefore := feedMetric(t, env.CollectorURL, "collector_token_stale_served_total")

	r := e2etest.Do(t, http.MethodDelete, env.TokensURL+"/v1/tokens/"+doomed.TokenID, env.AdminKey, nil, nil)
	revoked := time.Now()
	if r.Status != http.StatusNoContent {
		t.Fatalf("DELETE token = %d %s, want 204", r.Status, r.Body)
	}
	testenv.Stack(t, "kill9", "tokens")
	t.Logf("tokens service killed %s after the revocation answered", time.Since(revoked).Round(time.Millisecond))

	// Past the good token's cache TTL (30 s from its confirmation) with the
	// tokens service dead.
	var refusedAt time.Time
	goodSent, goodFailed := 0, 0
	for end := revoked.Add(35 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		st, id := post(doomed)
		switch {
		case st == http.StatusUnauthorized:
			if refusedAt.IsZero() {
				refusedAt = time.Now()
			}
		case st == http.StatusAccepted:
			accepted[doomed.ID] = append(accepted[doomed.ID], id)
			if !refusedAt.IsZero() || time.Since(revoked) > 30*time.Second {
				t.Errorf("revoked token accepted %s after the revocation (refused first at %v)", time.Since(revoked).Round(time.Millisecond), refusedAt)
			}
		default:
			if time.Since(revoked) > 30*time.Second {
				t.Errorf("revoked token %s after the revocation: status %d, want 401", time.Since(revoked).Round(time.Millisecond), st)
			}
		}
		st, id = post(good)
		goodSent++
		if st == http.StatusAccepted {
			accepted[good.ID] = append(accepted[good.ID], id)
		} else {
			goodFailed++
			t.Errorf("good token %s after the kill: status %d, want 202", time.Since(revoked).Round(time.Millisecond), st)
		}
	}
	if refusedAt.IsZero() {
		t.Fatalf("revoked token never refused with 401 within 35 s of the revocation")
	}
	t.Logf("revoked token refused %s after the revocation; good token: %d/%d accepted with the tokens service dead",
		refusedAt.Sub(revoked).Round(time.Millisecond), goodSent-goodFailed, goodSent)
	if d := feedMetric(t, env.CollectorURL, "collector_token_stale_served_total") - staleBefore; d == 0 {
		t.Errorf("no stale serve counted: the good token's entry did not outlive its TTL")
	}

	testenv.Stack(t, "start", "tokens")
	if st, _ := post(doomed); st != http.StatusUnauthorized {
		t.Errorf("revoked token after the tokens service is back = %d, want 401", st)
	}

	// Every 202 stored exactly once.
	pool := e2etest.Events(t, env)
	for _, app := range []e2etest.App{good, doomed} {
		want := accepted[app.ID]
		err := e2etest.WaitFor(60*time.Second, func() (bool, error) {
			got, err := e2etest.StoredCounts(context.Background(), pool, app.ID, since)
			if err != nil {
				return false, err
			}
			for _, id := range want {
				if got[id] != 1 {
					return false, fmt.Errorf("event %s of %s stored %d times, want 1", id, app.ID, got[id])
				}
			}
			if len(got) != len(want) {
				return false, fmt.Errorf("%s: %d events stored, %d accepted", app.ID, len(got), len(want))
			}
			return true, nil
		})
		if err != nil {
			t.Error(err)
		}
	}
}
