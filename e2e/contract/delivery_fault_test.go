//go:build fault

package contract

import (
	"context"
	"sync"
	"testing"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/platform/testenv"
)

// streamThrough sends a paced stream of events through the shared
// collector while fault hits the stack two seconds in, then checks that
// the client delivered everything and every event is stored exactly once.
// repair runs in a cleanup too, so the stack is left running whatever
// happens.
func streamThrough(t *testing.T, name string, fault func(t *testing.T), repair func(t *testing.T)) {
	env := e2etest.MustEnv(t)
	t.Cleanup(func() { repair(t) })
	app := e2etest.NewApp(t, env, "sdk-"+name)
	since := time.Now()
	var d drops
	c := newSDKClient(t, env.CollectorURL, app, &d, nil)

	// 8 s of events; the fault hits from the main goroutine (it may fail
	// the test) 2 s in.
	var ids []string
	var sendErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ids, sendErr = sendStream(c, 4000, 500)
	}()
	time.Sleep(2 * time.Second)
	fault(t)
	wg.Wait()
	if sendErr != nil {
		t.Fatal(sendErr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s := c.Stats()
	t.Logf("client stats: %+v", s)
	if s.Retries == 0 {
		t.Errorf("no request was retried (stats %+v): the fault did not reach the client", s)
	}
	if s.Delivered != uint64(len(ids)) || s.Dropped != 0 {
		t.Errorf("delivered %d, dropped %d; want %d and 0", s.Delivered, s.Dropped, len(ids))
	}
	d.check(t)
	storedOnce(t, env, app, since, ids)
	e2etest.Healthy(t, env)
}

// TestFault_ClientCollectorKilled: the collector is killed with SIGKILL in
// the middle of the stream and started again 1.5 s later. Requests in
// flight die with the process; the client sends them again.
func TestFault_ClientCollectorKilled(t *testing.T) {
	streamThrough(t, "kill9",
		func(t *testing.T) {
			testenv.Stack(t, "kill9", "collector")
			time.Sleep(1500 * time.Millisecond)
			testenv.Stack(t, "start", "collector")
		},
		func(t *testing.T) { testenv.Stack(t, "start", "collector") })
}

// TestFault_ClientBrokerRestarted: the broker is restarted in the middle of
// the stream; the collector answers 503 with Retry-After meanwhile.
func TestFault_ClientBrokerRestarted(t *testing.T) {
	streamThrough(t, "broker",
		func(t *testing.T) { testenv.Stack(t, "restart", "activemq") },
		func(t *testing.T) { testenv.Stack(t, "start", "activemq") })
}
