// Package smoketest is the chart's `helm test`: it posts one event to the
// data-collector with an app token and waits until the visual renderer counts
// it. The event carries a threat type made for this run, so the count it
// waits for is exactly its own event, whatever else the app sends.
package smoketest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"
)

// Config is read from the environment (the chart's test Pod sets it).
type Config struct {
	CollectorURL string        `env:"SMOKE_COLLECTOR_URL"`
	RendererURL  string        `env:"SMOKE_RENDERER_URL"`
	AppID        string        `env:"SMOKE_APP_ID"`
	Token        string        `env:"SMOKE_APP_TOKEN"`
	AdminKey     string        `env:"ADMIN_KEY"`
	Timeout      time.Duration `env:"SMOKE_TIMEOUT"`
}

// Load fills a Config from getenv; every field but SMOKE_TIMEOUT (default 2m)
// is required.
func Load(getenv func(string) string) (Config, error) {
	cfg := Config{Timeout: 2 * time.Minute}
	v := reflect.ValueOf(&cfg).Elem()
	var missing []string
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Tag.Get("env")
		s := getenv(name)
		if s == "" {
			if name != "SMOKE_TIMEOUT" {
				missing = append(missing, name)
			}
			continue
		}
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(s)
		case reflect.Int64:
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return cfg, fmt.Errorf("%s %q: want a positive duration", name, s)
			}
			f.SetInt(int64(d))
		}
	}
	if len(missing) > 0 {
		return cfg, fmt.Errorf("not set: %s", strings.Join(missing, ", "))
	}
	for _, u := range []struct{ name, val string }{{"SMOKE_COLLECTOR_URL", cfg.CollectorURL}, {"SMOKE_RENDERER_URL", cfg.RendererURL}} {
		p, err := url.Parse(u.val)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return cfg, fmt.Errorf("%s %q is not an http(s) URL", u.name, u.val)
		}
	}
	return cfg, nil
}

// Run posts the event and polls the renderer until it is counted, reporting
// progress on log. It fails when the collector does not answer 202 or the
// event is not counted within cfg.Timeout.
func Run(ctx context.Context, cfg Config, client *http.Client, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	threat := "helm-test-" + hex.EncodeToString(b[:])
	start := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"type":    "app.startup",
		"app":     map[string]string{"id": cfg.AppID, "version": "helm-test"},
		"device":  map[string]string{"model": "helm-test", "os": "helm-test"},
		"threats": []string{threat},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(cfg.CollectorURL, "/")+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post the event: %w", err)
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("post the event: %s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	fmt.Fprintf(log, "event with threat %s accepted: %s\n", threat, bytes.TrimSpace(answer))

	q := url.Values{
		"app_id":      {cfg.AppID},
		"granularity": {"hour"},
		"from":        {start.Truncate(time.Hour).Add(-time.Hour).Format(time.RFC3339)},
		"to":          {start.Truncate(time.Hour).Add(2 * time.Hour).Format(time.RFC3339)},
	}
	statsURL := strings.TrimSuffix(cfg.RendererURL, "/") + "/v1/stats/threat?" + q.Encode()
	var last string
	for {
		n, err := count(ctx, client, statsURL, cfg.AdminKey, threat)
		switch {
		case err != nil:
			last = err.Error()
		case n >= 1:
			fmt.Fprintf(log, "counted after %s\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		default:
			last = "not counted yet"
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the event was not counted within %s (last: %s)", cfg.Timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// count is the total of threat in the renderer's threat statistics.
func count(ctx context.Context, client *http.Client, statsURL, adminKey, threat string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("stats: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var stats struct {
		Series []struct {
			Key   string `json:"key"`
			Total int64  `json:"total"`
		} `json:"series"`
	}
	if err := json.Unmarshal(b, &stats); err != nil {
		return 0, errors.New("stats: not the expected JSON")
	}
	for _, s := range stats.Series {
		if s.Key == threat {
			return s.Total, nil
		}
	}
	return 0, nil
}
