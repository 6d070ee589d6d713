// Package load drives the collector with simulated events: an open model at
// a constant rate (vegeta, so a slow response never delays the next request
// and latencies carry no coordinated omission) and a closed model of users
// each sending back to back. Every load targets a loopback address only and
// is bounded in time and count.
package load

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"threatview/loadtest/sim"
	"threatview/loadtest/stats"
)

// Limits that keep every load bounded.
const (
	MaxDuration = 30 * time.Minute
	MaxRate     = 20000
	MaxUsers    = 5000
	MaxCount    = 2_000_000
)

// ErrNotLoopback means a load was aimed at a host other than the loopback.
var ErrNotLoopback = errors.New("load targets 127.0.0.1 only")

// CheckTarget accepts only http URLs whose host is a 127.0.0.0/8 address.
func CheckTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("collector url %q: %w", raw, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("collector url %q: scheme must be http: %w", raw, ErrNotLoopback)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("collector url %q: %w", raw, ErrNotLoopback)
	}
	return u, nil
}

// Target is where and as whom the load sends.
type Target struct {
	// URL is the collector's base URL (http://127.0.0.1:8080).
	URL string
	// Token is the app token sent as Bearer.
	Token string
	// ForwardedFor sends each request's simulated client address in
	// X-Forwarded-For (the collector must trust 127.0.0.1 as a proxy).
	ForwardedFor bool
}

func (t Target) endpoint() (string, error) {
	u, err := CheckTarget(t.URL)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(u.String(), "/") + "/v1/events", nil
}

// Result is the outcome of one phase of load.
type Result struct {
	Name      string
	Rate      float64 // requested rate (open model); 0 for closed model
	Users     int     // closed model
	Start     time.Time
	End       time.Time
	Samples   []stats.Sample
	Codes     map[int]int
	Errors    map[string]int // transport errors by message
	Accepted  int            // requests answered 202
	EventsOK  int            // events accepted (ids returned)
	IDsMissed int            // 202 responses whose body did not parse
}

// Summary returns the JMeter-style summary of r.
func (r Result) Summary() stats.Summary { return stats.Summarize(r.Name, r.Samples) }

// IDSink receives the ids of accepted events. It is called from one
// goroutine at a time.
type IDSink func(ids []string) error

// FileSink appends ids one per line to w.
func FileSink(w *bufio.Writer) IDSink {
	return func(ids []string) error {
		for _, id := range ids {
			if _, err := w.WriteString(id); err != nil {
				return err
			}
			if err := w.WriteByte('\n'); err != nil {
				return err
			}
		}
		return nil
	}
}

type recorder struct {
	mu     sync.Mutex
	res    *Result
	sink   IDSink
	sinkEr error
	// progress counters, read by the progress printer
	sent, failed atomic.Int64
	window       []time.Duration
}

func newRecorder(r *Result, sink IDSink) *recorder {
	r.Codes = map[int]int{}
	r.Errors = map[string]int{}
	return &recorder{res: r, sink: sink}
}

type acceptedBody struct {
	Accepted int      `json:"accepted"`
	IDs      []string `json:"ids"`
}

func (c *recorder) add(start time.Time, lat time.Duration, code int, errMsg string, body []byte) {
	ok := code == http.StatusAccepted
	var ids []string
	parsed := false
	if ok {
		var b acceptedBody
		if err := json.Unmarshal(body, &b); err == nil {
			ids, parsed = b.IDs, true
		}
	}
	c.sent.Add(1)
	if !ok {
		c.failed.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Samples = append(c.res.Samples, stats.Sample{Start: start, Latency: lat, OK: ok})
	c.window = append(c.window, lat)
	if code != 0 {
		c.res.Codes[code]++
	} else {
		c.res.Errors[shortErr(errMsg)]++
	}
	if ok {
		c.res.Accepted++
		c.res.EventsOK += len(ids)
		if !parsed {
			c.res.IDsMissed++
		}
		if c.sink != nil && len(ids) > 0 && c.sinkEr == nil {
			c.sinkEr = c.sink(ids)
		}
	}
}

func shortErr(s string) string {
	if s == "" {
		return "unknown error"
	}
	// Strip the per-request part (URL, port) so errors group.
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// takeWindow returns and clears the latencies since the last call.
func (c *recorder) takeWindow() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.window
	c.window = nil
	return w
}

// Progress prints one live line per second to w (normally stderr).
func (c *recorder) progress(ctx context.Context, w io.Writer, label string, total time.Duration, begin time.Time) func() {
	if w == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastSent int64
		for {
			select {
			case <-ctx.Done():
				fmt.Fprint(w, "\n")
				return
			case <-t.C:
			}
			win := c.takeWindow()
			slices.Sort(win)
			sent := c.sent.Load()
			el := time.Since(begin).Truncate(time.Second)
			tot := "∞"
			if total > 0 {
				tot = total.String()
			}
			fmt.Fprintf(w, "\r[%s] %s/%s  sent %d  failed %d  %d/s  p95(1s) %s ms   ",
				label, el, tot, sent, c.failed.Load(), sent-lastSent, stats.Ms(stats.Percentile(win, 95)))
			lastSent = sent
		}
	}()
	return func() { cancel(); <-done }
}

// Open sends at a constant rate for d (open model) and returns the result.
func Open(ctx context.Context, tgt Target, gen Source, name string, rate float64, d time.Duration, sink IDSink, progress io.Writer) (Result, error) {
	ep, err := tgt.endpoint()
	if err != nil {
		return Result{}, err
	}
	if rate <= 0 || rate > MaxRate {
		return Result{}, fmt.Errorf("rate %.0f out of (0, %d]", rate, MaxRate)
	}
	if d <= 0 || d > MaxDuration {
		return Result{}, fmt.Errorf("duration %s out of (0, %s]", d, MaxDuration)
	}
	res := Result{Name: name, Rate: rate}
	col := newRecorder(&res, sink)
	var genErr atomic.Value
	// Requests are generated ahead by one goroutine: vegeta starts the clock
	// before it asks the targeter, so generation must not sit in the measured
	// latency (nor serialize the workers on the generator's lock).
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	next := gen.Next
	if _, ready := gen.(*Pregenerated); !ready {
		ch := prefetch(pctx, gen, int(min(max(rate, 256), 8192)))
		next = func() (sim.Request, error) {
			p, ok := <-ch
			if !ok {
				return sim.Request{}, context.Canceled
			}
			return p.req, p.err
		}
	}
	targeter := func(t *vegeta.Target) error {
		req, err := next()
		if err != nil {
			genErr.Store(err)
			return err
		}
		t.Method = http.MethodPost
		t.URL = ep
		t.Body = req.Body
		t.Header = http.Header{
			"Content-Type":  {"application/json"},
			"Authorization": {"Bearer " + tgt.Token},
		}
		if tgt.ForwardedFor {
			t.Header["X-Forwarded-For"] = []string{req.ClientIP.String()}
		}
		return nil
	}
	tr := newConnTransport(10 * time.Second)
	defer tr.CloseIdleConnections()
	atk := vegeta.NewAttacker(
		// vegeta.Client first: the options after it set the redirect policy
		// on this client. The transport enforces the timeout and keeps
		// connections alive.
		vegeta.Client(&http.Client{Transport: tr}),
		vegeta.Workers(uint64(min(max(rate/50, 10), 200))),
		vegeta.MaxWorkers(MaxUsers),
		vegeta.MaxBody(1<<20),
		vegeta.Redirects(vegeta.NoFollow),
	)
	pacer := vegeta.Rate{Freq: int(rate * 1000), Per: time.Second * 1000}
	if rate == float64(int(rate)) {
		pacer = vegeta.Rate{Freq: int(rate), Per: time.Second}
	}
	res.Start = time.Now()
	stop := col.progress(ctx, progress, name, d, res.Start)
	results := atk.Attack(vegeta.Targeter(targeter), pacer, d, name)
	stopCh := ctx.Done()
	for {
		select {
		case r, ok := <-results:
			if !ok {
				res.End = time.Now()
				stop()
				if e, _ := genErr.Load().(error); e != nil {
					return res, e
				}
				return res, col.sinkEr
			}
			col.add(r.Timestamp, r.Latency, int(r.Code), r.Error, r.Body)
		case <-stopCh:
			atk.Stop()
			stopCh = nil
		}
	}
}

// Source gives the requests to send; it must be safe for concurrent use.
type Source interface {
	Next() (sim.Request, error)
}

// Pregenerated is a Source of requests generated before the load starts.
// Building a request (a random event, encoded) costs the generator about
// 50 µs; generated during a run, that is CPU the machine-wide CPU-per-request
// figure charges to the stack, and a goroutine hand-off per request besides.
// Open reads it directly, without the prefetching goroutine.
type Pregenerated struct {
	reqs []sim.Request
	next atomic.Int64
}

// ErrExhausted means a Pregenerated source has given all its requests.
var ErrExhausted = errors.New("load: pregenerated requests used up")

// Pregenerate takes n requests from src. Only what a load sends is kept
// (body and client address), not the events behind it.
func Pregenerate(src Source, n int) (*Pregenerated, error) {
	if n < 0 || n > MaxCount {
		return nil, fmt.Errorf("pregenerate %d requests: out of [0, %d]", n, MaxCount)
	}
	p := &Pregenerated{reqs: make([]sim.Request, n)}
	for i := range p.reqs {
		r, err := src.Next()
		if err != nil {
			return nil, err
		}
		p.reqs[i] = sim.Request{Body: r.Body, ClientIP: r.ClientIP}
	}
	return p, nil
}

// PregenerateFor takes from src enough requests for an open load at rate
// for d, with a margin for the pacer's rounding.
func PregenerateFor(src Source, rate float64, d time.Duration) (*Pregenerated, error) {
	return Pregenerate(src, int(math.Ceil(rate*d.Seconds()*1.01))+16)
}

// Next gives the next request, or ErrExhausted.
func (p *Pregenerated) Next() (sim.Request, error) {
	i := p.next.Add(1) - 1
	if i >= int64(len(p.reqs)) {
		return sim.Request{}, ErrExhausted
	}
	return p.reqs[i], nil
}

type prefetched struct {
	req sim.Request
	err error
}

// prefetch generates requests into a buffered channel until ctx ends or
// the generator fails.
func prefetch(ctx context.Context, gen Source, n int) <-chan prefetched {
	ch := make(chan prefetched, n)
	go func() {
		defer close(ch)
		for {
			req, err := gen.Next()
			select {
			case ch <- prefetched{req, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// Closed runs users concurrent users, each sending its next request as soon
// as the previous one is answered, until d has passed or count requests
// have been sent (whichever comes first; zero means no limit on that one).
func Closed(ctx context.Context, tgt Target, gen Source, name string, users int, d time.Duration, count int, sink IDSink, progress io.Writer) (Result, error) {
	ep, err := tgt.endpoint()
	if err != nil {
		return Result{}, err
	}
	if users <= 0 || users > MaxUsers {
		return Result{}, fmt.Errorf("users %d out of (0, %d]", users, MaxUsers)
	}
	if d <= 0 || d > MaxDuration {
		return Result{}, fmt.Errorf("duration %s out of (0, %s]", d, MaxDuration)
	}
	if count < 0 || count > MaxCount {
		return Result{}, fmt.Errorf("count %d out of [0, %d]", count, MaxCount)
	}
	tr := newConnTransport(10 * time.Second)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	res := Result{Name: name, Users: users}
	col := newRecorder(&res, sink)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var issued atomic.Int64
	var firstErr error
	var errOnce sync.Once
	res.Start = time.Now()
	stop := col.progress(ctx, progress, name, d, res.Start)
	var wg sync.WaitGroup
	for range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if count > 0 && issued.Add(1) > int64(count) {
					return
				}
				req, err := gen.Next()
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
				hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, ep, strings.NewReader(string(req.Body)))
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
				hreq.Header.Set("Content-Type", "application/json")
				hreq.Header.Set("Authorization", "Bearer "+tgt.Token)
				if tgt.ForwardedFor {
					hreq.Header.Set("X-Forwarded-For", req.ClientIP.String())
				}
				start := time.Now()
				resp, err := client.Do(hreq)
				if err != nil {
					if ctx.Err() != nil {
						return // the run ended mid-request: not a failure of the service
					}
					col.add(start, time.Since(start), 0, err.Error(), nil)
					continue
				}
				body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				lat := time.Since(start)
				if rerr != nil && ctx.Err() != nil {
					return
				}
				col.add(start, lat, resp.StatusCode, resp.Status, body)
			}
		}()
	}
	wg.Wait()
	res.End = time.Now()
	cancel()
	stop()
	if firstErr != nil {
		return res, firstErr
	}
	return res, col.sinkEr
}
