package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseOSVersion(t *testing.T) {
	for _, tc := range []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"14", 14, 0, true},
		{"17.5.1", 17, 5, true},
		{"10.0.22631", 10, 0, true},
		{" 13.1 beta", 13, 1, true},
		{"14 (Upside Down Cake)", 14, 0, true},
		{"", 0, 0, false},
		{"beta", 0, 0, false},
		{"99999.1", 0, 0, false},
		{"12.x", 12, 0, true},
	} {
		major, minor, ok := ParseOSVersion(tc.in)
		if major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("ParseOSVersion(%q) = %d, %d, %v, want %d, %d, %v", tc.in, major, minor, ok, tc.major, tc.minor, tc.ok)
		}
	}
}

func TestEvent_InvestigationFields(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	ev := Event{ID: "0190a5d2-0000-7000-8000-000000000001", Type: "app.startup", ReceivedAt: now, OccurredAt: now,
		App: App{ID: "demo"}, Device: Device{ID: "d1", Language: "en-GB"}, Country: "DE",
		Session: &Session{ID: "s1"}, User: &User{Pseudonym: "k1:ab"}, Location: &Location{Lat: 48.1, Lon: 11.5}}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"session":{"id":"s1"}`, `"user":{"pseudonym":"k1:ab"}`, `"location":{"lat":48.1,"lon":11.5}`, `"language":"en-GB"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Marshal = %s, want %s in it", b, want)
		}
	}
	reqs, err := DecodeEvents([]byte(EventsPrefix + RequestPrefix + string(b) + RequestSuffix + EventsSuffix))
	if err != nil || reqs[0].Err != nil {
		t.Fatalf("DecodeEvents: %v %v", err, reqs[0].Err)
	}
	got := reqs[0].Events[0]
	if got.SessionID() != "s1" || got.UserPseudonym() != "k1:ab" || *got.Location != *ev.Location || got.Device.Language != "en-GB" {
		t.Errorf("decoded %+v, want the fields of %+v", got, ev)
	}
	t.Run("LocationOutOfRange", func(t *testing.T) {
		bad := ev
		bad.Location = &Location{Lat: 91}
		if bad.validate() == nil {
			t.Error("validate() = nil for lat 91, want an error")
		}
	})
	t.Run("OldEventsWithoutThem", func(t *testing.T) {
		old := ev
		old.Session, old.User, old.Location, old.Device.Language = nil, nil, nil, ""
		b, _ := json.Marshal(old)
		if strings.Contains(string(b), "session") || strings.Contains(string(b), "location") || strings.Contains(string(b), "user") {
			t.Errorf("Marshal = %s, want no new fields", b)
		}
	})
}
