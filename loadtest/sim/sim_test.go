package sim

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"threatview/collector"
	"threatview/collector/geoip"
)

func fixedClock() time.Time { return time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC) }

func mustNew(t *testing.T, cfg Config) *Generator {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = fixedClock
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	return g
}

// The collector's own decoder is the schema: every generated body must pass it.
func TestGenerator_ValidAgainstCollector(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		requests int
	}{
		{"single", Config{AppID: "demo-app", Seed: 1}, 1000},
		{"batch", Config{AppID: "demo-app", Seed: 2, BatchSize: 50}, 20},
		{"ids and sent_at", Config{AppID: "demo-app", Seed: 3, EventIDs: true, SentAt: true}, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustNew(t, tt.cfg)
			for i := 0; i < tt.requests; i++ {
				req, err := g.Next()
				if err != nil {
					t.Fatalf("Next() = %v", err)
				}
				ins, err := collector.Decode(req.Body)
				if err != nil {
					t.Fatalf("collector.Decode(request %d) = %v\nbody: %s", i, err, req.Body)
				}
				want := max(tt.cfg.BatchSize, 1)
				if len(ins) != want {
					t.Fatalf("request %d decoded to %d events, want %d", i, len(ins), want)
				}
				for _, in := range ins {
					if in.App.ID != tt.cfg.AppID {
						t.Fatalf("app.id = %q, want %q (the token's app)", in.App.ID, tt.cfg.AppID)
					}
					if len(req.Body) > collector.MaxRequestBytes {
						t.Fatalf("request %d is %d bytes, over the collector's limit", i, len(req.Body))
					}
				}
			}
		})
	}
}

func TestGenerator_Reproducible(t *testing.T) {
	a := mustNew(t, Config{AppID: "a", Seed: 42, EventIDs: true})
	b := mustNew(t, Config{AppID: "a", Seed: 42, EventIDs: true})
	c := mustNew(t, Config{AppID: "a", Seed: 43, EventIDs: true})
	same := true
	for i := 0; i < 200; i++ {
		ra, _ := a.Next()
		rb, _ := b.Next()
		rc, _ := c.Next()
		if !bytes.Equal(ra.Body, rb.Body) || ra.ClientIP != rb.ClientIP {
			t.Fatalf("request %d differs for the same seed:\n%s\n%s", i, ra.Body, rb.Body)
		}
		if !bytes.Equal(ra.Body, rc.Body) {
			same = false
		}
	}
	if same {
		t.Fatal("seeds 42 and 43 produced the same 200 requests")
	}
}

// The traffic must be varied: many models, manufacturers, OSes, countries,
// threats and a spread of sizes, like a real fleet.
func TestGenerator_Variety(t *testing.T) {
	g := mustNew(t, Config{AppID: "demo-app", Seed: 7})
	models, makers, oses, versions, appVersions, types := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	countries := map[string]bool{}
	withThreats, late := 0, 0
	minSize, maxSize := 1<<30, 0
	const n = 3000
	for i := 0; i < n; i++ {
		req, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		e := req.Events[0]
		models[e.Device.Model] = true
		makers[e.Device.Manufacturer] = true
		oses[e.Device.OS] = true
		versions[e.Device.OS+" "+e.Device.OSVersion] = true
		appVersions[e.App.Version] = true
		types[e.Type] = true
		if len(e.Threats) > 0 {
			withThreats++
		}
		occ, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if err != nil {
			t.Fatalf("occurred_at %q: %v", e.OccurredAt, err)
		}
		if fixedClock().Sub(occ) > time.Hour {
			late++
		}
		minSize, maxSize = min(minSize, len(req.Body)), max(maxSize, len(req.Body))
		countries[countryOf(req.ClientIP)] = true
	}
	checks := []struct {
		what     string
		got, min int
	}{
		{"device models", len(models), 15},
		{"manufacturers", len(makers), 8},
		{"operating systems", len(oses), 4},
		{"OS versions", len(versions), 15},
		{"app versions", len(appVersions), 5},
		{"event types", len(types), 3},
		{"countries", len(countries), 10},
		{"events with threats", withThreats, n / 5},
		{"late events", late, 5},
		{"largest body (bytes)", maxSize, 4000},
	}
	for _, c := range checks {
		if c.got < c.min {
			t.Errorf("%s: %d, want at least %d", c.what, c.got, c.min)
		}
	}
	if countries[""] {
		t.Error("a client address lies outside every test GeoIP network")
	}
	if minSize > 600 {
		t.Errorf("smallest body %d bytes, want some small events", minSize)
	}
}

func countryOf(a netip.Addr) string {
	for _, n := range geoip.TestNetworks {
		if netip.MustParsePrefix(n.CIDR).Contains(a) {
			return n.Country
		}
	}
	return ""
}

func TestNew_Errors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"NoApp", Config{}},
		{"BatchTooLarge", Config{AppID: "a", BatchSize: 501}},
		{"IPv6Network", Config{AppID: "a", Networks: []netip.Prefix{netip.MustParsePrefix("2001:db8::/32")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Errorf("New(%+v) = nil error, want one", tt.cfg)
			}
		})
	}
}

func TestGenerator_BatchBody(t *testing.T) {
	g := mustNew(t, Config{AppID: "a", Seed: 1, BatchSize: 3})
	req, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(req.Body, &b); err != nil || len(b.Events) != 3 {
		t.Fatalf("batch body = %s (%v), want {\"events\": [3 events]}", req.Body, err)
	}
}

func FuzzGenerator_Seed(f *testing.F) {
	for _, s := range []uint64{0, 1, 99, 1 << 63} {
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, seed uint64, batch uint8) {
		g, err := New(Config{AppID: "demo-app", Seed: seed, BatchSize: int(batch%20) + 1, Now: fixedClock, EventIDs: seed%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			req, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := collector.Decode(req.Body); err != nil {
				t.Fatalf("collector.Decode = %v\nbody: %s", err, req.Body)
			}
		}
	})
}

func BenchmarkGenerator_Next(b *testing.B) {
	g, err := New(Config{AppID: "demo-app", Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
