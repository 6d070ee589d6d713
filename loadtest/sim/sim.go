// Package sim generates realistic, varied collector events: apps and versions,
// devices across manufacturers, operating systems and versions, threat lists,
// attributes of varied size and client addresses spread over the networks of
// the test GeoIP database. A Generator built from the same seed and clock
// produces the same sequence of events.
package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"threatview/collector/geoip"
)

// Event is one event in the collector's public contract (POST /v1/events).
type Event struct {
	Type       string         `json:"type"`
	OccurredAt string         `json:"occurred_at,omitempty"`
	EventID    string         `json:"event_id,omitempty"`
	SentAt     string         `json:"sent_at,omitempty"`
	App        App            `json:"app"`
	Device     Device         `json:"device"`
	Threats    []string       `json:"threats"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// App identifies the sending application.
type App struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
}

// Device describes the sending device.
type Device struct {
	ID           string `json:"id,omitempty"`
	Model        string `json:"model,omitempty"`
	Manufacturer string `json:"manufacturer,omitempty"`
	OS           string `json:"os,omitempty"`
	OSVersion    string `json:"os_version,omitempty"`
}

// Request is one generated request: its body and the client address the
// load generator announces in X-Forwarded-For.
type Request struct {
	Events   []Event
	ClientIP netip.Addr
	Body     []byte
}

// Config shapes the generated traffic. The zero value of every field but
// AppID has a sensible default.
type Config struct {
	// AppID is the app bound to the token the load uses; every event carries it.
	AppID string
	// Seed makes the sequence reproducible.
	Seed uint64
	// Networks are the client networks; defaults to DefaultNetworks.
	Networks []netip.Prefix
	// BatchSize is the number of events per request (1 = single-event body).
	BatchSize int
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// EventIDs, when true, gives every event a client event_id.
	EventIDs bool
	// SentAt, when true, sets sent_at on every event.
	SentAt bool
	// LateFraction is the share of events whose occurred_at lies hours to
	// days in the past (late delivery); defaults to 0.01. Negative means none.
	LateFraction float64
}

// Generator produces requests. It is safe for concurrent use.
type Generator struct {
	mu      sync.Mutex
	cfg     Config
	rnd     *rand.Rand
	devices []deviceProfile
	n       uint64
}

type deviceProfile struct {
	id           string
	model        string
	manufacturer string
	os           string
	osVersion    string
	appVersion   string
	ip           netip.Addr
}

// New returns a generator for cfg.
func New(cfg Config) (*Generator, error) {
	if cfg.AppID == "" {
		return nil, fmt.Errorf("sim: app id is required")
	}
	if len(cfg.Networks) == 0 {
		cfg.Networks = DefaultNetworks()
	}
	for _, p := range cfg.Networks {
		if !p.Addr().Is4() {
			return nil, fmt.Errorf("sim: network %s is not IPv4", p)
		}
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1
	}
	if cfg.BatchSize > 500 {
		return nil, fmt.Errorf("sim: batch size %d exceeds the collector's 500", cfg.BatchSize)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LateFraction == 0 {
		cfg.LateFraction = 0.01
	}
	g := &Generator{cfg: cfg, rnd: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	// A fleet of devices: each keeps its model, OS and address across events,
	// as real installs do, so per-device series look plausible.
	const fleet = 5000
	g.devices = make([]deviceProfile, fleet)
	for i := range g.devices {
		g.devices[i] = g.newDevice()
	}
	return g, nil
}

func (g *Generator) newDevice() deviceProfile {
	m := pickWeighted(g.rnd, models)
	osv := m.osVersions[g.rnd.IntN(len(m.osVersions))]
	return deviceProfile{
		id:           g.uuid(),
		model:        m.model,
		manufacturer: m.manufacturer,
		os:           m.os,
		osVersion:    osv,
		appVersion:   pickWeighted(g.rnd, appVersions),
		ip:           g.ipIn(g.cfg.Networks[g.rnd.IntN(len(g.cfg.Networks))]),
	}
}

func (g *Generator) ipIn(p netip.Prefix) netip.Addr {
	p = p.Masked()
	a := p.Addr().As4()
	base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	hostBits := 32 - p.Bits()
	var off uint32
	if hostBits > 0 {
		size := uint64(1) << hostBits
		off = uint32(g.rnd.Uint64N(size))
	}
	v := base + off
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// uuid returns a random (version 4) UUID drawn from the seeded source.
func (g *Generator) uuid() string {
	var b [16]byte
	hi, lo := g.rnd.Uint64(), g.rnd.Uint64()
	for i := 0; i < 8; i++ {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	out := make([]byte, 36)
	j := 0
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = hex[c>>4], hex[c&0xf]
		j += 2
	}
	return string(out)
}

// Next returns the next request.
func (g *Generator) Next() (Request, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// One client address per request: a batch comes from one device.
	d := &g.devices[g.rnd.IntN(len(g.devices))]
	// Devices are sometimes replaced (new installs), so the fleet drifts.
	if g.rnd.IntN(50) == 0 {
		*d = g.newDevice()
	}
	evs := make([]Event, g.cfg.BatchSize)
	for i := range evs {
		evs[i] = g.event(d)
	}
	var body []byte
	var err error
	if g.cfg.BatchSize == 1 {
		body, err = json.Marshal(evs[0])
	} else {
		body, err = json.Marshal(struct {
			Events []Event `json:"events"`
		}{evs})
	}
	if err != nil {
		return Request{}, fmt.Errorf("sim: encode: %w", err)
	}
	g.n++
	return Request{Events: evs, ClientIP: d.ip, Body: body}, nil
}

func (g *Generator) event(d *deviceProfile) Event {
	now := g.cfg.Now().UTC()
	occurred := now.Add(-time.Duration(g.rnd.IntN(5000)) * time.Millisecond)
	if g.cfg.LateFraction > 0 && g.rnd.Float64() < g.cfg.LateFraction {
		occurred = now.Add(-time.Duration(1+g.rnd.IntN(72)) * time.Hour).Add(-time.Duration(g.rnd.IntN(3600)) * time.Second)
	}
	e := Event{
		Type:       pickWeighted(g.rnd, eventTypes),
		OccurredAt: occurred.Format(time.RFC3339Nano),
		App:        App{ID: g.cfg.AppID, Version: d.appVersion},
		Device: Device{
			ID: d.id, Model: d.model, Manufacturer: d.manufacturer,
			OS: d.os, OSVersion: d.osVersion,
		},
		Threats:    g.threats(d.os),
		Attributes: g.attributes(d),
	}
	if g.cfg.EventIDs {
		e.EventID = g.uuid()
	}
	if g.cfg.SentAt {
		e.SentAt = now.Format(time.RFC3339Nano)
	}
	return e
}

func (g *Generator) threats(os string) []string {
	// Most startups see nothing; some see one or a few.
	r := g.rnd.Float64()
	n := 0
	switch {
	case r < 0.70:
		n = 0
	case r < 0.90:
		n = 1
	case r < 0.98:
		n = 2 + g.rnd.IntN(2)
	default:
		n = 4 + g.rnd.IntN(5)
	}
	list := threatsAndroid
	if os == "ios" || os == "ipados" {
		list = threatsIOS
	}
	if n > len(list) {
		n = len(list)
	}
	out := make([]string, 0, n)
	seen := 0
	for len(out) < n {
		i := g.rnd.IntN(len(list))
		if seen&(1<<i) != 0 {
			continue
		}
		seen |= 1 << i
		out = append(out, list[i])
	}
	return out
}

func (g *Generator) attributes(d *deviceProfile) map[string]any {
	a := map[string]any{
		"locale":       locales[g.rnd.IntN(len(locales))],
		"network":      networksKind[g.rnd.IntN(len(networksKind))],
		"battery":      g.rnd.IntN(101),
		"startup_ms":   80 + g.rnd.IntN(2500),
		"rooted":       g.rnd.IntN(40) == 0,
		"sdk_version":  "4." + strconv.Itoa(g.rnd.IntN(12)) + "." + strconv.Itoa(g.rnd.IntN(20)),
		"session_id":   g.uuid(),
		"screen_width": []int{720, 1080, 1170, 1284, 1440, 2048}[g.rnd.IntN(6)],
	}
	// A tail of larger payloads: installed packages or a diagnostic trace,
	// from a few hundred bytes up to about 8 KiB.
	switch r := g.rnd.Float64(); {
	case r < 0.10:
		n := 5 + g.rnd.IntN(60)
		pk := make([]string, n)
		for i := range pk {
			pk[i] = packages[g.rnd.IntN(len(packages))] + "." + strconv.Itoa(g.rnd.IntN(1000))
		}
		a["installed_packages"] = pk
	case r < 0.13:
		n := 512 + g.rnd.IntN(7*1024)
		b := make([]byte, n)
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 _-:/"
		for i := range b {
			b[i] = alphabet[g.rnd.IntN(len(alphabet))]
		}
		a["diagnostic"] = string(b)
	}
	return a
}

type weighted[T any] struct {
	v T
	w int
}

func pickWeighted[T any](r *rand.Rand, list []weighted[T]) T {
	total := 0
	for _, x := range list {
		total += x.w
	}
	n := r.IntN(total)
	for _, x := range list {
		if n < x.w {
			return x.v
		}
		n -= x.w
	}
	return list[len(list)-1].v
}

// DefaultNetworks returns the client networks used when no others are given:
// the IPv4 networks of the collector's test GeoIP database (the one the
// local stack loads), spread across countries.
func DefaultNetworks() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range geoip.TestNetworks {
		p, err := netip.ParsePrefix(n.CIDR)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		out = append(out, p)
	}
	return out
}

// ParseNetworks parses a comma-separated list of CIDR prefixes.
func ParseNetworks(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("sim: network %q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}
