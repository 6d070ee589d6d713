package threatview_test

import (
	"encoding/json"
	"strings"
	"testing"

	"threatview/sdk/go/threatview"
)

func TestEvent_InvestigationFields(t *testing.T) {
	acc := 12.5
	ev := threatview.Event{Type: "app.startup", App: threatview.App{ID: "a"},
		Device:   threatview.Device{ID: "d", Language: "en-GB"},
		Session:  &threatview.Session{ID: "s1"},
		User:     &threatview.User{ID: "u1"},
		Location: &threatview.Location{Lat: 48.137, Lon: 11.575, AccuracyM: &acc}}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"language":"en-GB"`, `"session":{"id":"s1"}`, `"user":{"id":"u1"}`, `"location":{"lat":48.137,"lon":11.575,"accuracy_m":12.5}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Marshal = %s, want %s in it", b, want)
		}
	}
	old, _ := json.Marshal(threatview.Event{Type: "app.startup", App: threatview.App{ID: "a"}})
	if strings.Contains(string(old), "session") || strings.Contains(string(old), "user") || strings.Contains(string(old), "location") {
		t.Errorf("an event without them marshals as %s", old)
	}
}
