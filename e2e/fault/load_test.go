//go:build fault

package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"threatview/e2e/internal/e2etest"
	"threatview/loadtest/sim"
)

// outcome is what happened to one request.
type outcome struct {
	sent, answered time.Time
	status         int    // 0: no answer (transport error)
	err            string // the transport error
	code           string // the error code of a JSON error answer
	rid            string
	eventIDs       []string // as sent
	ids            []string // as answered with 202
}

// recorder keeps every request's outcome.
type recorder struct {
	mu       sync.Mutex
	outcomes []outcome
}

func (r *recorder) add(o outcome) {
	r.mu.Lock()
	r.outcomes = append(r.outcomes, o)
	r.mu.Unlock()
}

func (r *recorder) all() []outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outcome(nil), r.outcomes...)
}

// sender posts simulated requests for one app.
type sender struct {
	url    string
	app    e2etest.App
	gen    *sim.Generator
	client *http.Client
	rec    *recorder
	seq    atomic.Int64
}

func newSender(env e2etest.Env, app e2etest.App, seed uint64, rec *recorder) (*sender, error) {
	gen, err := sim.New(sim.Config{AppID: app.ID, Seed: seed, EventIDs: true})
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	return &sender{
		url: env.CollectorURL + "/v1/events", app: app, gen: gen, rec: rec,
		// Longer than the collector's publish and audit timeouts (5 s each).
		client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
	}, nil
}

// send posts one simulated request and records its outcome.
func (s *sender) send(ctx context.Context) outcome {
	o := outcome{rid: fmt.Sprintf("%s-%d", s.app.ID, s.seq.Add(1))}
	req, err := s.gen.Next()
	if err != nil {
		o.err = err.Error()
		s.rec.add(o)
		return o
	}
	for _, e := range req.Events {
		o.eventIDs = append(o.eventIDs, e.EventID)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(req.Body))
	if err != nil {
		o.err = err.Error()
		s.rec.add(o)
		return o
	}
	hr.Header.Set("Authorization", "Bearer "+s.app.Token)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("X-Request-ID", o.rid)
	hr.Header.Set("X-Forwarded-For", req.ClientIP.String())
	o.sent = time.Now()
	resp, err := s.client.Do(hr)
	o.answered = time.Now()
	if err != nil {
		o.err = err.Error()
		s.rec.add(o)
		return o
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	o.answered = time.Now()
	o.status = resp.StatusCode
	if err != nil {
		// The status came but the body did not: the ids are unknown.
		o.err = err.Error()
		s.rec.add(o)
		return o
	}
	if resp.StatusCode != http.StatusAccepted {
		o.code = errorCode(body)
	}
	if resp.StatusCode == http.StatusAccepted {
		var a struct {
			Accepted int      `json:"accepted"`
			IDs      []string `json:"ids"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			o.err = "202 with an unreadable body: " + err.Error()
		}
		o.ids = a.IDs
	}
	s.rec.add(o)
	return o
}

// run sends at rate requests a second until stop is closed, with at most
// maxInFlight requests outstanding (a tick that finds them all busy is
// skipped), then waits for the outstanding ones.
func (s *sender) run(ctx context.Context, rate, maxInFlight int, stop <-chan struct{}) (skipped int) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-stop:
			return skipped
		case <-ctx.Done():
			return skipped
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			skipped++
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.send(ctx)
		}()
	}
}
