package threatview

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config configures a Client. Only URL and Token are required; the zero
// value of every other field is a sensible default.
type Config struct {
	// URL is the collector's base URL, e.g. http://127.0.0.1:8080.
	URL string
	// Token is the app token (Authorization: Bearer).
	Token string
	// App fills Event.App when an event has no app id.
	App App

	// MaxBatchEvents caps the events of one request (default and at most
	// MaxBatchEvents).
	MaxBatchEvents int
	// MaxBatchBytes caps a request body before gzip (default and at most
	// MaxRequestBytes - 16 KiB).
	MaxBatchBytes int
	// FlushInterval is how long an event may wait for its batch to fill
	// (default 1s).
	FlushInterval time.Duration
	// Concurrency is how many requests may be in flight (default 2).
	Concurrency int

	// QueueSize bounds the events held in memory, queued or in flight
	// (default 10,000; at least MaxBatchEvents). Unused with SpoolDir.
	QueueSize int
	// SpoolDir, when set, keeps queued events on disk instead of in
	// memory: Send returns once the event is written there, a sender reads
	// a batch back when it sends it (memory holds at most Concurrency
	// batches of at most MaxBatchBytes), and a client opened later on the
	// same directory sends what an earlier one left. A line that cannot be
	// read is skipped and reported to OnDrop (DropSpoolError). One client
	// at a time may use a directory.
	SpoolDir string
	// MaxSpoolBytes bounds the spool on disk (default 256 MiB).
	MaxSpoolBytes int64

	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts (defaults 200ms and 30s); each wait is jittered and never
	// shorter than the collector's Retry-After.
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts drops a batch after that many failed attempts; 0 (the
	// default) retries until Close.
	MaxAttempts int
	// RequestTimeout bounds one request (default 30s).
	RequestTimeout time.Duration

	// OnDrop is called with the events the client gave up on. It runs on
	// the client's goroutines: keep it short.
	OnDrop func(Drop)
	// HTTPClient sends the requests (default: a client with keep-alive).
	HTTPClient *http.Client
	// UserAgent is sent with every request.
	UserAgent string
}

// maxBodyBytes is the default and largest batch body: under the
// collector's limit, with room for its own accounting.
const maxBodyBytes = MaxRequestBytes - 16<<10

func (c *Config) setDefaults() error {
	if c.URL == "" {
		return errors.New("threatview: Config.URL is required")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("threatview: Config.URL %q is not an http(s) URL", c.URL)
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.Token == "" {
		return errors.New("threatview: Config.Token is required")
	}
	switch {
	case c.MaxBatchEvents <= 0 || c.MaxBatchEvents > MaxBatchEvents:
		c.MaxBatchEvents = MaxBatchEvents
	}
	if c.MaxBatchBytes <= 0 || c.MaxBatchBytes > maxBodyBytes {
		c.MaxBatchBytes = maxBodyBytes
	}
	if c.MaxBatchBytes < MaxEventBytes+64 {
		return fmt.Errorf("threatview: Config.MaxBatchBytes must be at least %d", MaxEventBytes+64)
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 2
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 10000
	}
	if c.QueueSize < c.MaxBatchEvents {
		c.QueueSize = c.MaxBatchEvents
	}
	if c.MaxSpoolBytes <= 0 {
		c.MaxSpoolBytes = 256 << 20
	}
	if c.MaxSpoolBytes < int64(c.MaxBatchBytes) {
		c.MaxSpoolBytes = int64(c.MaxBatchBytes)
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 200 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: c.Concurrency,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	if c.UserAgent == "" {
		c.UserAgent = "threatview-go/1"
	}
	return nil
}
