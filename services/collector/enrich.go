package collector

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"threatview/collector/geoip/countries"
	"threatview/platform/wire"
)

// Places maps a location's grid cell to the country it lies in.
type Places interface {
	// CountryAt returns the ISO 3166-1 alpha-2 code of the country of the
	// cell whose south-west corner is lat, lon and whose side is grid
	// degrees, or "" when the cell lies in no country (at sea).
	CountryAt(lat, lon, grid float64) string
}

var (
	defaultPlacesOnce sync.Once
	defaultPlaces     Places
)

// DefaultPlaces returns the embedded Natural Earth country shapes behind a
// bounded per-cell cache (countries.DefaultCacheCells), shared by the
// process. It panics if the embedded file does not parse: a build defect
// that the countries package's tests catch.
func DefaultPlaces() Places {
	defaultPlacesOnce.Do(func() {
		s, err := countries.Default()
		if err != nil {
			panic(fmt.Sprintf("embedded country shapes: %v", err))
		}
		defaultPlaces = countries.NewCache(s, countries.DefaultCacheCells)
	})
	return defaultPlaces
}

// Enricher turns validated inputs into the events the collector publishes.
type Enricher struct {
	locator Locator
	places  Places // nil: the country comes from the client address only
	trusted []netip.Prefix
	ipMode  IPMode
	users   *wire.Pseudonymizer // nil: user ids are dropped
	grid    float64             // location grid, degrees
}

// NewEnricher returns an Enricher. locator may be nil (every address's
// country is ZZ); trusted are the proxies whose X-Forwarded-For is believed.
// It keeps truncated client addresses (IPTruncate) unless WithIPMode says
// otherwise, and takes the country of an event with a location from
// DefaultPlaces unless WithPlaces says otherwise.
func NewEnricher(locator Locator, trusted []netip.Prefix) *Enricher {
	return &Enricher{locator: locator, places: DefaultPlaces(), trusted: trusted, ipMode: IPTruncate, grid: DefaultGrid}
}

// WithPlaces sets where the country of a location comes from (nil: from
// the client address only) and returns e.
func (e *Enricher) WithPlaces(p Places) *Enricher {
	e.places = p
	return e
}

// WithIPMode sets how much of the client address is kept and returns e.
func (e *Enricher) WithIPMode(m IPMode) *Enricher {
	e.ipMode = m
	return e
}

// KeptIP returns the client address of a request (see ClientIP) in the
// form the IP mode allows to be stored, logged or sent.
func (e *Enricher) KeptIP(remoteAddr, xff string) string {
	return e.ipMode.Keep(ClientIP(remoteAddr, xff, e.trusted))
}

// Trusted returns the trusted proxy prefixes.
func (e *Enricher) Trusted() []netip.Prefix { return e.trusted }

// CheckApp returns a *FieldError wrapping ErrForbidden for the first event
// whose app.id is not the token's app.
func CheckApp(in []Input, appID string) error {
	for i := range in {
		if in[i].App.ID != appID {
			idx := i
			if len(in) == 1 {
				idx = -1
			}
			return &FieldError{Index: idx, Field: "app.id", Message: "is not the app the token belongs to", Err: ErrForbidden}
		}
	}
	return nil
}

// Enrich fills out (which must have len(in) elements) from in and req.
// single tells whether the body was a single event (indexes are then -1).
//
//   - id: the client's event_id, else a new UUIDv7;
//   - received_at: req.ReceivedAt;
//   - occurred_at: the client's (received_at when absent), shifted by
//     received_at − sent_at when sent_at is given (clock-skew correction),
//     and clamped to received_at when it is more than MaxFutureSkew ahead;
//     whenever it differs from what the client sent, original_occurred_at
//     keeps the client's value;
//   - country: the country of the location's grid cell (see Places; the
//     cell, not the finer position, so that the country tells nothing the
//     stored cell does not) when the event has a location in a country;
//     else, and for a cell at sea, from the full client address (see
//     ClientIP); client_ip: only what the IP mode keeps of it (see IPMode).
//
// It returns a *FieldError wrapping ErrInvalid when skew correction moves
// occurred_at outside [MinTime, MaxTime] (422: the contract bounds times
// before and after the correction).
func (e *Enricher) Enrich(req Request, in []Input, out []wire.Event) error {
	ip := ClientIP(req.RemoteAddr, req.XFF, e.trusted)
	country := UnknownCountry
	if ip.IsValid() && e.locator != nil {
		country = e.locator.Country(ip)
	}
	ipStr := e.ipMode.Keep(ip)
	recv := req.ReceivedAt.UTC()
	for i := range in {
		src := &in[i]
		ev := &out[i]
		if src.EventID != "" {
			ev.ID = src.EventID
		} else {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			ev.ID = id.String()
		}
		ev.Type = src.Type
		ev.ReceivedAt = recv
		ev.App = src.App
		ev.Device = src.Device
		ev.Country = country
		ev.ClientIP = ipStr
		ev.TokenID = req.Identity.TokenID
		ev.RequestID = req.RequestID
		ev.Threats = src.Threats
		ev.Attributes = src.Attributes
		e.investigation(src, ev)
		if ev.Location != nil && e.places != nil {
			if c := e.places.CountryAt(ev.Location.Lat, ev.Location.Lon, e.grid); c != "" {
				ev.Country = c
			}
		}
		var ok bool
		ev.OccurredAt, ev.OriginalOccurredAt, ok = occurredAt(src, recv)
		if !ok {
			idx := i
			if len(in) == 1 {
				idx = -1
			}
			return &FieldError{Index: idx, Field: "occurred_at", Message: timeRangeMsg + " once corrected by sent_at (clock skew)", Err: ErrInvalid}
		}
		ev.SentAt = nil
		if !src.sentAt.IsZero() {
			s := src.sentAt
			ev.SentAt = &s
		}
	}
	return nil
}

// occurredAt applies skew correction and the future clamp. ok is false when
// the corrected time falls outside [MinTime, MaxTime].
func occurredAt(in *Input, recv time.Time) (occurred time.Time, original *time.Time, ok bool) {
	if in.occurredAt.IsZero() {
		return recv, nil, true
	}
	occurred = in.occurredAt
	if !in.sentAt.IsZero() {
		// In seconds and nanoseconds, not time.Duration: the skew between
		// two valid times may exceed Duration's 292 years, and Sub would
		// saturate silently.
		sec := occurred.Unix() + recv.Unix() - in.sentAt.Unix()
		nsec := int64(occurred.Nanosecond()) + int64(recv.Nanosecond()) - int64(in.sentAt.Nanosecond())
		occurred = time.Unix(sec, nsec).UTC()
		if !InTimeRange(occurred) {
			return time.Time{}, nil, false
		}
	}
	if occurred.Sub(recv) > MaxFutureSkew {
		occurred = recv
	}
	if !occurred.Equal(in.occurredAt) {
		o := in.occurredAt
		original = &o
	}
	return occurred, original, true
}

// ClientIP returns the client's address: the peer of the connection, or,
// when the peer is a trusted proxy, the rightmost X-Forwarded-For address
// that is not itself a trusted proxy (the leftmost when all are). An
// unparsable address yields the zero Addr.
func ClientIP(remoteAddr, xff string, trusted []netip.Prefix) netip.Addr {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap().WithZone("")
	if xff == "" || !contains(trusted, peer) {
		return peer
	}
	client := peer
	for rest := xff; rest != ""; {
		var part string
		if i := strings.LastIndexByte(rest, ','); i >= 0 {
			part, rest = rest[i+1:], rest[:i]
		} else {
			part, rest = rest, ""
		}
		a, err := netip.ParseAddr(strings.TrimSpace(part))
		if err != nil {
			// A garbled hop: trust nothing further left of it.
			return client
		}
		client = a.Unmap().WithZone("")
		if !contains(trusted, client) {
			return client
		}
	}
	return client
}

func contains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
