package collector_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/uuid"

	"threatview/collector"
	"threatview/platform/wire"
)

type fakeLocator map[string]string

func (f fakeLocator) Country(ip netip.Addr) string {
	if c, ok := f[ip.String()]; ok {
		return c
	}
	return collector.UnknownCountry
}

func enrichOne(t *testing.T, body string, req collector.Request, trusted []netip.Prefix) wire.Event {
	t.Helper()
	in, err := collector.Decode([]byte(body))
	if err != nil {
		t.Fatalf("Decode(%s) = %v", body, err)
	}
	out := make([]wire.Event, len(in))
	en := collector.NewEnricher(fakeLocator{"1.0.0.10": "AU", "203.0.113.7": "FR"}, trusted)
	if err := en.Enrich(req, in, out); err != nil {
		t.Fatalf("Enrich = %v", err)
	}
	return out[0]
}

func TestEnricher_Enrich(t *testing.T) {
	recv := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	req := collector.Request{Identity: collector.Identity{TokenID: "tok1", AppID: "a"}, RemoteAddr: "1.0.0.10:5555", RequestID: "r1", ReceivedAt: recv}

	t.Run("OK defaults", func(t *testing.T) {
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"}}`, req, nil)
		id, err := uuid.Parse(ev.ID)
		if err != nil || id.Version() != 7 {
			t.Fatalf("id %q is not a UUIDv7 (%v)", ev.ID, err)
		}
		if !ev.ReceivedAt.Equal(recv) || !ev.OccurredAt.Equal(recv) || ev.OriginalOccurredAt != nil {
			t.Fatalf("times = %v %v %v", ev.ReceivedAt, ev.OccurredAt, ev.OriginalOccurredAt)
		}
		if ev.Country != "AU" || ev.ClientIP != "1.0.0.0" || ev.TokenID != "tok1" || ev.RequestID != "r1" {
			t.Fatalf("enriched = %+v", ev)
		}
	})
	t.Run("OK client event_id", func(t *testing.T) {
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"},"event_id":"0190f0a8-1234-7abc-8def-0123456789ab"}`, req, nil)
		if ev.ID != "0190f0a8-1234-7abc-8def-0123456789ab" {
			t.Fatalf("id = %s", ev.ID)
		}
	})
	t.Run("skew corrected", func(t *testing.T) {
		// The device clock is 10 minutes behind: it says it sent at 11:50.
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"},"occurred_at":"2026-03-01T11:45:00Z","sent_at":"2026-03-01T11:50:00Z"}`, req, nil)
		want := time.Date(2026, 3, 1, 11, 55, 0, 0, time.UTC)
		if !ev.OccurredAt.Equal(want) {
			t.Fatalf("occurred_at = %v, want %v", ev.OccurredAt, want)
		}
		if ev.OriginalOccurredAt == nil || !ev.OriginalOccurredAt.Equal(time.Date(2026, 3, 1, 11, 45, 0, 0, time.UTC)) {
			t.Fatalf("original_occurred_at = %v", ev.OriginalOccurredAt)
		}
		if ev.SentAt == nil || !ev.SentAt.Equal(time.Date(2026, 3, 1, 11, 50, 0, 0, time.UTC)) {
			t.Fatalf("sent_at = %v", ev.SentAt)
		}
	})
	t.Run("future clamped", func(t *testing.T) {
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"},"occurred_at":"2026-03-02T11:00:01Z"}`, req, nil)
		if !ev.OccurredAt.Equal(recv) {
			t.Fatalf("occurred_at = %v, want clamped to %v", ev.OccurredAt, recv)
		}
		if ev.OriginalOccurredAt == nil || !ev.OriginalOccurredAt.Equal(time.Date(2026, 3, 2, 11, 0, 1, 0, time.UTC)) {
			t.Fatalf("original_occurred_at = %v", ev.OriginalOccurredAt)
		}
	})
	t.Run("near future kept", func(t *testing.T) {
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"},"occurred_at":"2026-03-02T10:59:59+00:00"}`, req, nil)
		if !ev.OccurredAt.Equal(time.Date(2026, 3, 2, 10, 59, 59, 0, time.UTC)) || ev.OriginalOccurredAt != nil {
			t.Fatalf("occurred_at = %v original %v", ev.OccurredAt, ev.OriginalOccurredAt)
		}
	})
	t.Run("unknown country ZZ", func(t *testing.T) {
		r := req
		r.RemoteAddr = "198.51.100.1:1"
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"}}`, r, nil)
		if ev.Country != "ZZ" {
			t.Fatalf("country = %s, want ZZ", ev.Country)
		}
	})
	t.Run("XFF ignored from untrusted peer", func(t *testing.T) {
		r := req
		r.XFF = "203.0.113.7"
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"}}`, r, nil)
		if ev.ClientIP != "1.0.0.0" || ev.Country != "AU" {
			t.Fatalf("client = %s %s, want the peer", ev.ClientIP, ev.Country)
		}
	})
	t.Run("XFF believed from trusted proxy", func(t *testing.T) {
		r := req
		r.RemoteAddr = "10.0.0.5:80"
		r.XFF = "203.0.113.7"
		ev := enrichOne(t, `{"type":"t","app":{"id":"a"}}`, r, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
		if ev.ClientIP != "203.0.113.0" || ev.Country != "FR" {
			t.Fatalf("client = %s %s, want 203.0.113.0 FR (country from the full address, /24 kept)", ev.ClientIP, ev.Country)
		}
	})
}

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		remote, xff, want string
	}{
		{"1.2.3.4:5", "", "1.2.3.4"},
		{"1.2.3.4:5", "9.9.9.9", "1.2.3.4"},                     // untrusted peer: XFF ignored
		{"10.1.1.1:5", "9.9.9.9", "9.9.9.9"},                    // trusted proxy
		{"10.1.1.1:5", "6.6.6.6, 9.9.9.9, 10.2.2.2", "9.9.9.9"}, // rightmost untrusted; spoofed leftmost ignored
		{"10.1.1.1:5", "10.3.3.3, 10.2.2.2", "10.3.3.3"},        // all trusted: leftmost
		{"10.1.1.1:5", "garbage, 9.9.9.9", "9.9.9.9"},           // garbage left of a good hop is never reached
		{"10.1.1.1:5", "9.9.9.9, garbage", "10.1.1.1"},          // garbage hop: stop trusting
		{"[fd00::1]:5", "2001:db8::1", "2001:db8::1"},           // IPv6 proxy
		{"[::ffff:1.2.3.4]:5", "", "1.2.3.4"},                   // v4-mapped unmapped
		{"not-an-address", "", "invalid IP"},
	}
	for _, tt := range tests {
		got := collector.ClientIP(tt.remote, tt.xff, trusted)
		if got.String() != tt.want {
			t.Errorf("ClientIP(%q, %q) = %s, want %s", tt.remote, tt.xff, got, tt.want)
		}
	}
}

func TestCheckApp(t *testing.T) {
	in, err := collector.Decode([]byte(`{"events":[{"type":"t","app":{"id":"a"}},{"type":"t","app":{"id":"b"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := collector.CheckApp(in, "a"); !errors.Is(err, collector.ErrForbidden) {
		t.Fatalf("CheckApp = %v, want ErrForbidden", err)
	} else if fe := new(collector.FieldError); !errors.As(err, &fe) || fe.Index != 1 || fe.Field != "app.id" {
		t.Fatalf("CheckApp = %v, want index 1 app.id", err)
	}
	if err := collector.CheckApp(in[:1], "a"); err != nil {
		t.Fatalf("CheckApp = %v, want nil", err)
	}
}

func TestIPMode_Keep(t *testing.T) {
	tests := []struct {
		mode collector.IPMode
		addr string
		want string
	}{
		{collector.IPTruncate, "203.0.113.77", "203.0.113.0"},
		{collector.IPTruncate, "2001:db8:abcd:12:3456::7", "2001:db8:abcd::"},
		{collector.IPTruncate, "::ffff:198.51.100.9", "198.51.100.0"}, // a v4-mapped address is cut as IPv4, never to "::"
		{collector.IPNone, "203.0.113.77", ""},
		{collector.IPFull, "203.0.113.77", "203.0.113.77"},
		{collector.IPFull, "2001:db8::1", "2001:db8::1"},
		{collector.IPMode("bogus"), "203.0.113.77", "203.0.113.0"},
		{collector.IPTruncate, "", ""},
	}
	for _, tt := range tests {
		var a netip.Addr
		if tt.addr != "" {
			a = netip.MustParseAddr(tt.addr)
		}
		if got := tt.mode.Keep(a); got != tt.want {
			t.Errorf("IPMode(%q).Keep(%s) = %q, want %q", tt.mode, tt.addr, got, tt.want)
		}
	}
}

func TestParseIPMode(t *testing.T) {
	for in, want := range map[string]collector.IPMode{"": collector.IPTruncate, "truncate": collector.IPTruncate, "none": collector.IPNone, "full": collector.IPFull} {
		if got, err := collector.ParseIPMode(in); err != nil || got != want {
			t.Errorf("ParseIPMode(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Full", "24", "truncated"} {
		if _, err := collector.ParseIPMode(in); err == nil {
			t.Errorf("ParseIPMode(%q) = nil error, want one", in)
		}
	}
}

func TestEnricher_WithIPMode(t *testing.T) {
	in, err := collector.Decode([]byte(`{"type":"t","app":{"id":"a"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req := collector.Request{RemoteAddr: "1.0.0.10:5555", ReceivedAt: time.Now()}
	for mode, want := range map[collector.IPMode]string{collector.IPTruncate: "1.0.0.0", collector.IPNone: "", collector.IPFull: "1.0.0.10"} {
		en := collector.NewEnricher(fakeLocator{"1.0.0.10": "AU"}, nil).WithIPMode(mode)
		out := make([]wire.Event, 1)
		if err := en.Enrich(req, in, out); err != nil {
			t.Fatal(err)
		}
		if out[0].ClientIP != want || out[0].Country != "AU" {
			t.Errorf("mode %s: client_ip %q country %s, want %q AU", mode, out[0].ClientIP, out[0].Country, want)
		}
		if got := en.KeptIP("1.0.0.10:5555", ""); got != want {
			t.Errorf("mode %s: KeptIP = %q, want %q", mode, got, want)
		}
	}
}

// TestEnricher_EnrichLocationCountry: the country comes from the location's
// grid cell when it lies in a country, else from the client address.
func TestEnricher_EnrichLocationCountry(t *testing.T) {
	req := collector.Request{RemoteAddr: "31.0.1.10:5555", ReceivedAt: time.Now()} // an address in Germany
	ip := fakeLocator{"31.0.1.10": "DE"}
	for _, c := range []struct {
		name, location string
		grid           float64
		want           string
	}{
		{"France from a German address", `"location":{"lat":48.85661,"lon":2.35222}`, 0, "FR"},
		{"Germany", `"location":{"lat":52.52137,"lon":13.40494}`, 0, "DE"},
		{"Tokyo on a 1-degree grid", `"location":{"lat":35.6762,"lon":139.6503}`, 1, "JP"},
		{"at sea: the address", `"location":{"lat":45,"lon":-30}`, 0, "DE"},
		{"no location: the address", `"device":{"id":"d"}`, 0, "DE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := collector.Decode([]byte(`{"type":"t","app":{"id":"a"},` + c.location + `}`))
			if err != nil {
				t.Fatal(err)
			}
			out := make([]wire.Event, 1)
			en := collector.NewEnricher(ip, nil).WithInvestigation(nil, c.grid)
			if err := en.Enrich(req, in, out); err != nil {
				t.Fatal(err)
			}
			if out[0].Country != c.want {
				t.Errorf("Enrich(%s) country = %s, want %s", c.location, out[0].Country, c.want)
			}
		})
	}
	t.Run("WithPlaces(nil): the address", func(t *testing.T) {
		in, err := collector.Decode([]byte(`{"type":"t","app":{"id":"a"},"location":{"lat":48.85661,"lon":2.35222}}`))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]wire.Event, 1)
		if err := collector.NewEnricher(ip, nil).WithPlaces(nil).Enrich(req, in, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Country != "DE" || out[0].Location == nil {
			t.Errorf("country = %s, location %v; want DE and the location kept", out[0].Country, out[0].Location)
		}
	})
}

// BenchmarkEnricher_Location is Enrich of one event with a location, its
// country from the cell (cached) and from the address only: the difference
// is what the location's country costs per event.
func BenchmarkEnricher_Location(b *testing.B) {
	in, err := collector.Decode([]byte(`{"type":"t","event_id":"0190f0a8-1234-7abc-8def-0123456789ab","app":{"id":"a"},"location":{"lat":48.85661,"lon":2.35222}}`))
	if err != nil {
		b.Fatal(err)
	}
	req := collector.Request{RemoteAddr: "31.0.1.10:5555", ReceivedAt: time.Now()}
	for name, places := range map[string]collector.Places{"Cell": collector.DefaultPlaces(), "AddressOnly": nil} {
		b.Run(name, func(b *testing.B) {
			en := collector.NewEnricher(fakeLocator{"31.0.1.10": "DE"}, nil).WithPlaces(places)
			out := make([]wire.Event, 1)
			b.ReportAllocs()
			for b.Loop() {
				if err := en.Enrich(req, in, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
