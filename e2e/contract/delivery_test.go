package contract

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
	"threatview/sdk/go/threatview"
)

// drops collects what a client reports dropped.
type drops struct {
	mu   sync.Mutex
	list []threatview.Drop
}

func (d *drops) add(x threatview.Drop) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
}

func (d *drops) check(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.list {
		t.Errorf("client dropped %d events: %s %d %s %s %v", len(x.EventIDs), x.Reason, x.Status, x.Code, x.Message, x.Err)
	}
}

// newSDKClient returns a client of the collector at url for app whose every
// request and answer is validated against the collector's document.
func newSDKClient(t *testing.T, url string, app e2etest.App, d *drops, tweak func(*threatview.Config)) *threatview.Client {
	t.Helper()
	cfg := threatview.Config{
		URL:           url,
		Token:         app.Token,
		App:           threatview.App{ID: app.ID, Version: "1.0.0"},
		FlushInterval: 100 * time.Millisecond,
		Concurrency:   4,
		MinBackoff:    50 * time.Millisecond,
		MaxBackoff:    2 * time.Second,
		OnDrop:        d.add,
		HTTPClient: &http.Client{Transport: &transport{
			t: t, spec: specFor(t, "collector"), wantValid: true,
			base: &http.Transport{MaxIdleConnsPerHost: 8},
		}},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := threatview.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// event is the n-th test event with its id set.
func event(n int) threatview.Event {
	return threatview.Event{
		EventID:    threatview.NewEventID(),
		Type:       "app.startup",
		OccurredAt: time.Now().UTC(),
		Device:     threatview.Device{ID: fmt.Sprintf("dev-%d", n%50), Model: "Pixel 8", Manufacturer: "Google", OS: "android", OSVersion: "14"},
		Threats:    []any{"root"},
		Attributes: map[string]any{"n": n},
	}
}

// sendPaced sends n events at about rate a second (0: at once) and
// returns their ids.
func sendPaced(t *testing.T, c *threatview.Client, n, rate int) []string {
	t.Helper()
	ids, err := sendStream(c, n, rate)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// sendStream is sendPaced for any goroutine.
func sendStream(c *threatview.Client, n, rate int) ([]string, error) {
	ids := make([]string, 0, n)
	start := time.Now()
	for i := range n {
		ev := event(i)
		if err := c.Send(context.Background(), ev); err != nil {
			return ids, fmt.Errorf("Send %d: %w", i, err)
		}
		ids = append(ids, ev.EventID)
		if rate > 0 {
			if ahead := time.Duration(i+1)*time.Second/time.Duration(rate) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	return ids, nil
}

// storedOnce waits until every id is in events.events for app and checks
// that each is there exactly once and nothing else is.
func storedOnce(t *testing.T, env e2etest.Env, app e2etest.App, since time.Time, ids []string) {
	t.Helper()
	pool := e2etest.Events(t, env)
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var got map[string]int
	err := e2etest.WaitFor(90*time.Second, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		got, err = e2etest.StoredCounts(ctx, pool, app.ID, since.Add(-time.Minute))
		return err == nil && len(got) >= len(want), err
	})
	if err != nil {
		t.Errorf("stored %d distinct events of %d after 90s: %v", len(got), len(want), err)
	}
	// A late redelivery would show as a second row: look once more.
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err = e2etest.StoredCounts(ctx, pool, app.ID, since.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	missing, dup, extra := 0, 0, 0
	for id := range want {
		switch got[id] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	for id := range got {
		if !want[id] {
			extra++
		}
	}
	if missing+dup+extra > 0 {
		t.Errorf("of %d events sent: %d missing, %d stored more than once, %d stored that were not sent", len(want), missing, dup, extra)
	}
	t.Logf("%d events sent, %d stored, each exactly once: %v", len(want), len(got), missing+dup+extra == 0)
}

// freePort returns a loopback address nobody listens on.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startCollector runs a collector of its own against the stack's broker,
// tokens service and audit logger, with extra settings, until the test
// ends; it returns its base URL.
func startCollector(t *testing.T, env e2etest.Env, extra ...string) string {
	t.Helper()
	bin := testenv.MustBuild(t, "./services/collector/cmd/collector")
	addr := freePort(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"HTTP_ADDR="+addr,
		"TOKENS_SERVICE_URL="+env.TokensURL,
		"AUDITLOGGER_SERVICE_URL="+env.AuditURL,
		"LOG_LEVEL=warn",
	)
	cmd.Env = append(cmd.Env, extra...)
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", out.String())
		}
	})
	url := "http://" + addr
	err := e2etest.WaitFor(30*time.Second, func() (bool, error) {
		r, err := e2etest.TryDo(http.MethodGet, url+"/readyz", "", nil, nil)
		return err == nil && r.Status == http.StatusOK, err
	})
	if err != nil {
		t.Fatalf("own collector not ready: %v\n%s", err, out.String())
	}
	return url
}

// TestDelivery_RateLimited sends through a collector with a per-app rate
// limit (COLLECTOR_RATE_LIMIT) far below what the client offers: the
// client gets 429s, waits their Retry-After, and every event is stored
// exactly once.
func TestDelivery_RateLimited(t *testing.T) {
	env := e2etest.MustEnv(t)
	url := startCollector(t, env, "COLLECTOR_RATE_LIMIT=4", "COLLECTOR_RATE_BURST=2")
	app := e2etest.NewApp(t, env, "sdk-429")
	since := time.Now()
	var d drops
	c := newSDKClient(t, url, app, &d, func(cfg *threatview.Config) { cfg.MaxBatchEvents = 100 })
	ids := sendPaced(t, c, 2000, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s := c.Stats()
	t.Logf("client stats: %+v", s)
	if s.Throttled == 0 {
		t.Errorf("no 429 seen (stats %+v): the rate limit was not exercised", s)
	}
	if s.Delivered != uint64(len(ids)) || s.Dropped != 0 {
		t.Errorf("delivered %d, dropped %d; want %d and 0", s.Delivered, s.Dropped, len(ids))
	}
	d.check(t)
	storedOnce(t, env, app, since, ids)
}

// TestDelivery_SpoolRestart stops a client with a spool in the middle of
// a stream without flushing (as a crash would: Close with a cancelled
// context aborts what is in flight) and opens another on the same
// directory: it sends what the first left, and every event is stored
// exactly once, those whose requests were cut off included.
func TestDelivery_SpoolRestart(t *testing.T) {
	env := e2etest.MustEnv(t)
	app := e2etest.NewApp(t, env, "sdk-spool")
	dir := t.TempDir()
	since := time.Now()
	var d drops
	spooled := func(cfg *threatview.Config) {
		cfg.SpoolDir = dir
		cfg.MaxBatchEvents = 50
	}
	c1 := newSDKClient(t, env.CollectorURL, app, &d, spooled)
	ids := sendPaced(t, c1, 1510, 3000) // the last batch is partial
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err := c1.Close(cancelled)
	left := c1.Stats()
	t.Logf("first client stopped: %+v (%v)", left, err)
	if left.Pending == 0 {
		t.Fatalf("the first client had delivered everything before it stopped (stats %+v): the test proves nothing", left)
	}
	if !errors.Is(err, threatview.ErrUndelivered) {
		t.Errorf("Close(cancelled) = %v, want ErrUndelivered", err)
	}

	c2 := newSDKClient(t, env.CollectorURL, app, &d, spooled)
	if s := c2.Stats(); s.Pending != left.Pending {
		t.Errorf("reopened client has %d events pending, want the %d the first left", s.Pending, left.Pending)
	}
	ids = append(ids, sendPaced(t, c2, 500, 0)...)
	ctx, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel2()
	if err := c2.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s := c2.Stats(); s.SpoolBytes != 0 || s.Pending != 0 {
		t.Errorf("after Close the spool holds %d bytes, %d events", s.SpoolBytes, s.Pending)
	}
	d.check(t)
	storedOnce(t, env, app, since, ids)
}
